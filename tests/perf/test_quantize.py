"""int8 decoding (decoding/quantize.py): a quantised copy that decodes (nearly) like the float model."""

import torch
from torch import nn

from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.quantize import is_quantized, quantize_int8


def test_every_linear_is_quantised_and_the_original_is_untouched(tiny_model):
    model = tiny_model(0)
    q = quantize_int8(model)
    assert is_quantized(q) and not is_quantized(model)
    assert not any(type(m) is nn.Linear for m in q.modules())
    assert sum(type(m) is nn.Linear for m in model.modules()) > 0


def test_int8_logits_stay_close_to_float(tiny_model, tiny_sources):
    model = tiny_model(0)
    q = quantize_int8(model)
    src = torch.tensor([s[:5] for s in tiny_sources(0) if len(s) >= 5])  # (B, 5)
    tgt = torch.randint(4, 40, (src.size(0), 6), generator=torch.Generator().manual_seed(1))
    with torch.inference_mode():
        ref, got = model(src, tgt), q(src, tgt)  # (B, L, V)
    scale = ref.abs().max()
    assert (got - ref).abs().max() < 0.05 * scale  # per-channel int8: about 1% of the logit range here


def test_int8_greedy_and_beam_nearly_match_float(tiny_model, tiny_sources):
    model, src = tiny_model(2), tiny_sources(3)
    q = quantize_int8(model)
    ref, got = greedy_decode(model, src, max_len=12), greedy_decode(q, src, max_len=12)
    same = sum(a == b for r, g in zip(ref, got) for a, b in zip(r, g))
    assert same >= 0.8 * sum(len(r) for r in ref)
    beams = beam_search(q, src, beam_size=3, max_len=12)
    assert len(beams) == len(src) and all(b for b in beams)


def test_inplace_quantises_the_given_model(tiny_model):
    model = tiny_model(0)
    assert quantize_int8(model, inplace=True) is model and is_quantized(model)

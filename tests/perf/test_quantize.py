"""int8 decoding (decoding/quantize.py): a quantised copy that decodes (nearly) like the float model, on torch's
fbgemm int8 kernel or, where that is gone, on a float fallback with the same outputs."""

import copy
import warnings

import pytest
import torch
from torch import nn

from scratchformer.decoding import beam_search, greedy_decode, quantize
from scratchformer.decoding.quantize import Int8Linear, quantize_int8


def is_quantized(model) -> bool:
    """True when some layer of `model` runs in dynamic int8."""
    return any(isinstance(m, Int8Linear) for m in model.modules())


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


class _NoDynamicLinear:
    """torch.ops.quantized without linear_dynamic (a torch that removed it), or with one that raises."""

    def __init__(self, raises: bool = False):
        self.raises, self.real = raises, torch.ops.quantized

    def __getattr__(self, name):
        if name != "linear_dynamic":
            return getattr(self.real, name)
        if not self.raises:
            raise AttributeError(name)

        def fail(*args, **kwargs):
            raise RuntimeError("quantized::linear_dynamic() got an unexpected keyword argument 'reduce_range'")
        return fail


def _logits(model, seed=0):
    g = torch.Generator().manual_seed(seed)
    src, tgt = torch.randint(4, 40, (3, 6), generator=g), torch.randint(4, 40, (3, 5), generator=g)
    with torch.inference_mode():
        return model(src, tgt)  # (3, 5, V)


def test_the_int8_kernel_is_the_one_quantize_dynamic_ran(tiny_model):
    """Same int8 weights and kernel as torch.ao's quantize_dynamic (fbgemm, per channel): the same outputs, so
    the speed and BLEU cost measured before still hold."""
    quantize_dynamic = pytest.importorskip("torch.ao.quantization").quantize_dynamic
    from torch.ao.quantization import per_channel_dynamic_qconfig

    if quantize.int8_backend() != "fbgemm" or "fbgemm" not in torch.backends.quantized.supported_engines:
        pytest.skip("this torch has no fbgemm dynamic int8 Linear")
    model = tiny_model(0)
    engine = torch.backends.quantized.engine
    torch.backends.quantized.engine = "fbgemm"
    try:
        with warnings.catch_warnings():
            warnings.simplefilter("ignore")
            theirs = quantize_dynamic(copy.deepcopy(model), {nn.Linear: per_channel_dynamic_qconfig},
                                      dtype=torch.qint8)
    finally:
        torch.backends.quantized.engine = engine
    torch.testing.assert_close(_logits(quantize_int8(model)), _logits(theirs), atol=1e-5, rtol=0)


@pytest.mark.parametrize("raises", [False, True], ids=["op-missing", "op-raises"])
def test_the_float_fallback_equals_the_int8_kernel(tiny_model, monkeypatch, raises):
    """Without a working quantized::linear_dynamic, int8 layers compute in float32 from the dequantised
    weights and the activations rounded as the kernel rounds them: the same outputs up to summation order."""
    model = quantize_int8(tiny_model(0))
    fast = _logits(model)
    monkeypatch.setitem(quantize._state, "backend", None)
    monkeypatch.setattr(torch.ops, "quantized", _NoDynamicLinear(raises), raising=False)
    if raises:
        with pytest.warns(RuntimeWarning, match="int8 GEMM unavailable.*float32"):
            slow = _logits(model)
    else:
        slow = _logits(model)
    assert quantize.int8_backend() == "float" and is_quantized(model)
    torch.testing.assert_close(slow, fast, atol=1e-5, rtol=0)  # logits of order 1


def test_a_quantised_model_copies_and_moves(tiny_model):
    model = quantize_int8(tiny_model(0))
    ref = _logits(model)  # packs its weights
    torch.testing.assert_close(_logits(copy.deepcopy(model)), ref, atol=0, rtol=0)  # the same kernel, repacked
    torch.testing.assert_close(_logits(model.cpu()), ref, atol=0, rtol=0)

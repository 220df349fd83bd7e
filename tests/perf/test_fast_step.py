"""The lean decoder step (decoding/fast_step.py) is the modules' cached step with less Python: same tokens, same
logits (to 1e-5), for greedy and beam search, batched and alone; models it does not cover run the modules."""

import pytest
import torch

from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.common import Seq2SeqSteps
from scratchformer.decoding.fast_step import LeanDecoder, modules_step
from scratchformer.decoding.spec import Search

PLACEMENTS = ["post", "pre", "seed000"]


def _both(monkeypatch, fn):
    """fn() with the lean step off, then on."""
    with modules_step():
        modules = fn()
    return modules, fn()


@pytest.mark.parametrize("overrides", [{"norm": p} for p in PLACEMENTS] + [
    {"positions": "learned", "ffn_kind": "gated", "activation": "silu"}, {"positions": "sinusoidal-concat"}],
    ids=PLACEMENTS + ["learned-gated", "sinusoidal-concat"])
def test_greedy_tokens_and_logits_equal_the_modules(monkeypatch, tiny_model, tiny_sources, overrides):
    model = tiny_model(seed=1, **overrides)
    assert LeanDecoder.for_model(model).embedding is not None  # the embedding's lean path runs too
    src = tiny_sources(seed=3)
    modules, lean = _both(monkeypatch, lambda: greedy_decode(model, src, Search(max_output_len=12), return_logits=True))
    assert lean.tokens == modules.tokens
    assert any(len(t) > 1 for t in lean.tokens)  # the comparison covers several steps
    torch.testing.assert_close(lean.logits, modules.logits, rtol=0, atol=1e-5)


@pytest.mark.parametrize("norm", PLACEMENTS)
@pytest.mark.parametrize("batched", [True, False], ids=["batch", "alone"])
def test_beam4_hypotheses_equal_the_modules(monkeypatch, tiny_model, tiny_sources, norm, batched):
    model = tiny_model(seed=2, norm=norm)
    src = tiny_sources(seed=4) if batched else tiny_sources(seed=4)[:1]
    modules, lean = _both(monkeypatch, lambda: beam_search(model, src, Search(beam=4, max_output_len=10, n_best=4)))
    assert [[h.tokens for h in hs] for hs in lean] == [[h.tokens for h in hs] for hs in modules]
    for hs_lean, hs_mod in zip(lean, modules):
        for a, b in zip(hs_lean, hs_mod):
            assert a.logprob == pytest.approx(b.logprob, abs=1e-5)


def test_step_logits_equal_model_decode(tiny_model, tiny_sources):
    """Step by step against the uncached reference `model.decode` on the whole prefix."""
    model = tiny_model(seed=5)
    src = torch.tensor([s + [0] * (12 - len(s)) for s in tiny_sources(seed=6, lengths=(4, 11))])
    with torch.inference_mode():
        mask = model.src_mask(src)
        memory = model.encode(src, mask)
        steps = Seq2SeqSteps(model, memory, mask)
        assert steps.lean is not None
        tokens = torch.tensor([[1, 5, 9, 7, 3], [1, 8, 8, 4, 6]])
        for t in range(1, tokens.size(1) + 1):
            expect = model.generator.logits(model.decode(memory, mask, tokens[:, :t])[:, -1])
            torch.testing.assert_close(steps(tokens[:, :t]), expect, rtol=0, atol=1e-5)


@pytest.mark.parametrize("overrides", [{"positions": "rope"}, {"n_kv_heads": 1}, {"norm_kind": "rms"}],
                         ids=["rope", "gqa", "rmsnorm"])
def test_uncovered_models_run_the_modules(tiny_model, overrides):
    assert LeanDecoder.for_model(tiny_model(seed=0, **overrides)) is None


def test_off_in_training_mode_when_weights_are_kept_and_by_env(monkeypatch, tiny_model):
    model = tiny_model(seed=0)
    assert LeanDecoder.for_model(model.train()) is None
    model.eval().keep_attention_weights(True)
    assert LeanDecoder.for_model(model) is None  # attention pictures need the modules
    model.keep_attention_weights(False)
    with modules_step():
        assert LeanDecoder.for_model(model) is None


def test_a_forward_hook_in_the_step_runs_the_modules(monkeypatch, tiny_model, tiny_sources):
    """lab/heads.py masks a head with a pre-hook on W^O: the lean step would skip it, so it steps aside."""
    model = tiny_model(seed=3)
    w_o = model.decoder.layers[0].self_attn.w_o
    handle = w_o.register_forward_pre_hook(lambda m, args: (args[0] * 0,))
    try:
        assert LeanDecoder.for_model(model) is None
        modules, lean = _both(monkeypatch, lambda: greedy_decode(model, tiny_sources(seed=1), Search(max_output_len=8),
                                                                 return_logits=True))
        torch.testing.assert_close(lean.logits, modules.logits, rtol=0, atol=0)  # both ran the hooked modules
    finally:
        handle.remove()
    assert LeanDecoder.for_model(model) is not None


def test_no_hidden_switch_outside_the_options():
    """The lean step has no environment switch (SCRATCHFORMER_LEAN_STEP is gone): the modules are asked for in
    code, by the equality tests and bench_decode_paths.py, with `modules_step()`."""
    from pathlib import Path

    from scratchformer.decoding import fast_step

    assert not hasattr(fast_step, "ENV")
    src = Path(fast_step.__file__).resolve().parents[1]
    assert not [p for p in src.rglob("*.py") if "SCRATCHFORMER_LEAN_STEP" in p.read_text(encoding="utf-8")]

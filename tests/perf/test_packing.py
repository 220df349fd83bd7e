"""Packed GEMM weights for decoding (decoding/packing.py): same numbers, used only for their row count and only
where measured faster, gone after the call, retired when a weight changes, off for good if MKL's private ops
are missing or fail. The measurement runs on a fake clock (tests/perf/conftest.py: fake_tuner)."""

import pytest
import torch
from torch import nn

from scratchformer import autotune
from scratchformer.decoding import beam_search, greedy_decode, packing
from scratchformer.decoding.packing import packed_linears, packing_available
from scratchformer.decoding.spec import Search

needs_mkl = pytest.mark.skipif(not packing_available(), reason="this torch has no MKL packed GEMM")

PACKED_FASTER = {"packed": 1.0, "unpacked": 2.0}


class _Ops:
    """Stands in for torch.ops.mkl: counts the packed calls' row counts, or breaks one op."""

    def __init__(self, calls: list[int] | None = None, broken: str | None = None, absent: str | None = None):
        self.calls, self.broken, self.absent, self.real = calls, broken, absent, torch.ops.mkl

    def __getattr__(self, name):
        if name == self.absent:
            raise AttributeError(name)
        if name == self.broken:
            def fail(*args):
                raise RuntimeError(f"{name}() expected 4 arguments, got {len(args)}")  # as a changed signature
            return fail
        op = getattr(self.real, name)
        if name == "_mkl_linear" and self.calls is not None:
            return lambda *a: self.calls.append(a[-1]) or op(*a)
        return op


def _count_packed_calls(monkeypatch) -> list[int]:
    calls = []
    monkeypatch.setattr(packing.torch.ops, "mkl", _Ops(calls), raising=False)
    return calls


@pytest.fixture
def fresh_process(monkeypatch):
    """packing's "failed in this process" state, reset for the test and restored after it."""
    monkeypatch.setattr(packing, "_broken", [])


@needs_mkl
def test_fixed_length_decoding_with_packs_equals_without(tiny_model, tiny_sources, monkeypatch, fake_tuner):
    model = tiny_model(0)
    src = tiny_sources(1, lengths=(3, 7, 5, 9, 2, 11, 4, 6, 8))  # 9 sentences: greedy runs 9 rows
    ref_greedy = greedy_decode(model, src, Search(force_len=12), return_logits=True)  # autotune off: unpacked
    ref_beam = beam_search(model, src, Search(beam=3, max_output_len=12, n_best=3, min_len=12))
    fake_tuner(**PACKED_FASTER)
    calls = _count_packed_calls(monkeypatch)
    got_greedy = greedy_decode(model, src, Search(force_len=12), return_logits=True)
    assert calls and set(calls) == {9}  # packed for the 9 rows, and only used at 9 rows
    calls.clear()
    got_beam = beam_search(model, src, Search(beam=3, max_output_len=12, n_best=3, min_len=12))
    assert calls and set(calls) == {27}
    assert got_greedy.tokens == ref_greedy.tokens
    # other GEMM kernels, 12 steps each fed by the last: 1.4e-6 measured at 2 threads (AVX2), so 1e-5
    torch.testing.assert_close(got_greedy.logits, ref_greedy.logits, atol=1e-5, rtol=0)
    assert [[h.tokens for h in hs] for hs in got_beam] == [[h.tokens for h in hs] for hs in ref_beam]
    assert not any("forward" in m.__dict__ for m in model.modules())  # the class forward is back everywhere
    calls.clear()
    greedy_decode(model, src, Search(max_output_len=12))  # batched free decoding: sentences finish early, no packing
    beam_search(model, src, Search(beam=3, max_output_len=12))
    assert calls == []
    one = src[:1]  # beam search over one sentence: its 4 beams run to its end, packed
    got_one = [[h.tokens for h in hs] for hs in beam_search(model, one, Search(beam=4, max_output_len=12, n_best=4))]
    assert calls and set(calls) == {4}
    monkeypatch.setenv(autotune.ENV, "0")  # the safe default: unpacked
    calls.clear()
    spec = Search(beam=4, max_output_len=12, n_best=4)
    assert [[h.tokens for h in hs] for hs in beam_search(model, one, spec)] == got_one
    assert calls == []
    packing._PACKS.pop(model, None)


@needs_mkl
def test_greedy_over_one_sentence_packs_its_one_row(tiny_model, tiny_sources, monkeypatch, fake_tuner):
    """One sentence decodes one row until it ends (batch 1: interactive translation), so greedy packs for it."""
    model = tiny_model(0)
    one = tiny_sources(2)[:1]
    ref = greedy_decode(model, one, Search(max_output_len=12), return_logits=True)  # autotune off: unpacked
    fake_tuner(**PACKED_FASTER)
    calls = _count_packed_calls(monkeypatch)
    got = greedy_decode(model, one, Search(max_output_len=12), return_logits=True)
    assert calls and set(calls) == {1}
    assert got.tokens == ref.tokens
    torch.testing.assert_close(got.logits, ref.logits, atol=1e-5, rtol=0)
    packing._PACKS.pop(model, None)


def _owner() -> tuple[nn.Module, torch.Tensor, torch.Tensor]:
    torch.manual_seed(0)
    owner = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    return owner, torch.randn(8, 16), torch.randn(3, 16)


@needs_mkl
def test_pack_serves_its_row_count_and_retires_on_weight_change(fake_tuner):
    fake_tuner(**PACKED_FASTER)
    owner, x8, x3 = _owner()
    with torch.no_grad():
        ref8, ref3 = owner(x8), owner(x3)
        with packed_linears(owner, [owner], rows=8) as on:
            assert on
            torch.testing.assert_close(owner(x8), ref8, atol=1e-6, rtol=0)
            torch.testing.assert_close(owner(x3), ref3, atol=1e-6, rtol=0)  # other row counts: unpacked
            owner[0].weight.mul_(2.0)  # an in-place update: the stale pack must not be used
            torch.testing.assert_close(owner(x8), owner[2](owner[1](x8 @ owner[0].weight.t() + owner[0].bias)))
        with packed_linears(owner, [owner], rows=8):  # re-packed from the new weights
            torch.testing.assert_close(owner(x8), owner[2](owner[1](x8 @ owner[0].weight.t() + owner[0].bias)))
    packing._PACKS.pop(owner, None)


@needs_mkl
@pytest.mark.parametrize("seconds, packs", [(PACKED_FASTER, True), ({"packed": 2.0, "unpacked": 1.0}, False),
                                            ({"packed": 0.95, "unpacked": 1.0}, False)],  # within the margin
                         ids=["faster", "slower", "within-margin"])
def test_packing_only_where_measured_faster(fake_tuner, seconds, packs):
    clock = fake_tuner(**seconds)
    owner, x8, _ = _owner()
    with torch.no_grad():
        ref = owner(x8)
        with packed_linears(owner, [owner], rows=8) as on:
            assert on is packs
            torch.testing.assert_close(owner(x8), ref, atol=1e-6, rtol=0)
        assert set(clock.calls) == {"packed", "unpacked"}
        clock.calls.clear()
        packing._PACKS.pop(owner, None)
        with packed_linears(owner, [owner], rows=8) as on:  # the same shapes and rows: the kept choice
            assert on is packs and clock.calls == []
        with packed_linears(owner, [owner], rows=5):  # another row count: measured again
            assert clock.calls
    packing._PACKS.pop(owner, None)


def test_no_packing_with_gradients_in_training_or_with_autotune_off(fake_tuner, monkeypatch):
    fake_tuner(**PACKED_FASTER)
    owner = nn.Linear(4, 4)
    with packed_linears(owner, [owner], rows=8) as on:  # gradients enabled
        assert not on
    with torch.no_grad():
        with packed_linears(owner.train(), [owner], rows=8) as on:
            assert not on
        monkeypatch.setenv(autotune.ENV, "0")
        with packed_linears(owner.eval(), [owner], rows=8) as on:
            assert not on
    assert "forward" not in owner.__dict__



@pytest.mark.skipif(not packing_available(torch.bfloat16), reason="oneDNN's packed bf16 GEMM does not run here")
def test_bf16_weights_pack_through_onednn_with_the_same_tokens(tiny_model, tiny_sources, monkeypatch, fake_tuner):
    """bf16 weights (`--dtype bf16`, or auto's) pack through oneDNN, as a bf16 package's do: one sentence's beams
    and fixed-length greedy run packed, with the tokens and (to bf16's rounding) the logits of the unpacked step."""
    model = tiny_model(0).to(torch.bfloat16)
    src = tiny_sources(1, lengths=(3, 7, 5))
    ref = greedy_decode(model, src, Search(force_len=10), return_logits=True)  # autotune off: unpacked
    ref_one = beam_search(model, src[:1], Search(beam=4, max_output_len=10, n_best=4))
    fake_tuner(**PACKED_FASTER)
    calls = []
    real = packing._packed_linear
    monkeypatch.setattr(packing, "_packed_linear", lambda x, p, w, b, rows: calls.append((w.dtype, rows))
                        or real(x, p, w, b, rows))
    got = greedy_decode(model, src, Search(force_len=10), return_logits=True)
    assert calls and set(calls) == {(torch.bfloat16, 3)}
    assert got.tokens == ref.tokens
    torch.testing.assert_close(got.logits, ref.logits, atol=2e-2, rtol=0)
    calls.clear()
    got_one = beam_search(model, src[:1], Search(beam=4, max_output_len=10, n_best=4))
    assert set(calls) == {(torch.bfloat16, 4)}
    assert [[h.tokens for h in hs] for hs in got_one] == [[h.tokens for h in hs] for hs in ref_one]
    assert not any("forward" in m.__dict__ for m in model.modules())
    packing._PACKS.pop(model, None)


@pytest.mark.skipif(not packing_available(torch.bfloat16), reason="oneDNN's packed bf16 GEMM does not run here")
def test_bf16_packs_serve_free_batched_decoding_as_sentences_finish(tiny_model, tiny_sources, monkeypatch, fake_tuner):
    """A oneDNN pack serves any row count: batched free decoding (sentences ending apart) packs on its first step and
    keeps the packs while rows leave, with the unpacked step's tokens; fp32's MKL packs would be set aside there."""
    model = tiny_model(0).to(torch.bfloat16)
    src = tiny_sources(1, lengths=(3, 7, 5, 9, 2, 11))
    spec, beams = Search(max_output_len=None), Search(beam=3, max_output_len=None)  # budgets: source length + 50
    ref, ref_beam = greedy_decode(model, src, spec), beam_search(model, src, beams)
    fake_tuner(**PACKED_FASTER)
    rows = []
    real = packing._packed_linear

    def counted(x, p, w, b, r):
        if x.numel() == x.size(0) * x.size(-1):  # a step's rows (N, 1, D) or (N, D), not the memory's projection
            rows.append(x.size(0))
        return real(x, p, w, b, r)

    monkeypatch.setattr(packing, "_packed_linear", counted)
    assert greedy_decode(model, src, spec) == ref
    assert max(rows) == 6 and min(rows) < 6  # packed from the first step to the last sentence's
    assert len({len(t) for t in ref}) > 1  # the sentences did end apart
    rows.clear()
    got = beam_search(model, src, beams)
    assert [[h.tokens for h in hs] for hs in got] == [[h.tokens for h in hs] for hs in ref_beam]
    assert max(rows) == 18 and min(rows) < 18
    assert not any("forward" in m.__dict__ for m in model.modules())
    packing._PACKS.pop(model, None)

@needs_mkl
@pytest.mark.parametrize("op", ["_mkl_linear", "_mkl_reorder_linear_weight"])
def test_a_missing_op_means_unpacked_with_the_same_outputs(fake_tuner, monkeypatch, fresh_process, op):
    fake_tuner(**PACKED_FASTER)
    owner, x8, _ = _owner()
    monkeypatch.setattr(packing.torch.ops, "mkl", _Ops(absent=op), raising=False)
    with torch.no_grad():
        ref = owner(x8)
        with packed_linears(owner, [owner], rows=8) as on:
            assert not on
            torch.testing.assert_close(owner(x8), ref, atol=1e-6, rtol=0)


@needs_mkl
@pytest.mark.parametrize("op, measure_runs", [("_mkl_reorder_linear_weight", True), ("_mkl_linear", True),
                                              ("_mkl_linear", False)],
                         ids=["reorder-in-measuring", "linear-in-measuring", "linear-in-decoding"])
def test_a_failing_op_turns_packing_off_for_the_process(fake_tuner, monkeypatch, fresh_process, op, measure_runs):
    """A changed signature raises where it is first called: while measuring, or (a cached choice) in the first
    packed call of a decoding step. Either way: a warning, the same outputs, no packing from then on."""
    clock = fake_tuner(**PACKED_FASTER)
    if not measure_runs:  # the clock reports without running the work: as if the choice came from the cache
        autotune.TUNER.measure = lambda name, work: clock.seconds[name]
    owner, x8, _ = _owner()
    monkeypatch.setattr(packing.torch.ops, "mkl", _Ops(broken=op), raising=False)
    with torch.no_grad():
        ref = owner(x8)
        with pytest.warns(RuntimeWarning, match="MKL packed GEMMs failed.*decoding goes on unpacked"):
            with packed_linears(owner, [owner], rows=8):
                torch.testing.assert_close(owner(x8), ref, atol=1e-6, rtol=0)
                torch.testing.assert_close(owner(x8), ref, atol=1e-6, rtol=0)  # and again, without a new warning
        assert packing._broken and not packing_available()
        with packed_linears(owner, [owner], rows=8) as on:
            assert not on
    assert "forward" not in owner[0].__dict__
    packing._PACKS.pop(owner, None)

"""Packed GEMM weights for decoding (decoding/packing.py): same numbers, used only for their row count, gone
after the call, retired when a weight changes."""

import pytest
import torch
from torch import nn

from scratchformer.decoding import beam_search, greedy_decode, packing
from scratchformer.decoding.packing import drop_packs, packed_linears, packing_available

needs_mkl = pytest.mark.skipif(not packing_available(), reason="this torch has no MKL packed GEMM")


def _count_packed_calls(monkeypatch) -> list[int]:
    calls = []
    real = torch.ops.mkl

    class Spy:
        def __getattr__(self, name):
            if name == "_mkl_linear":
                return lambda *a: calls.append(a[-1]) or real._mkl_linear(*a)
            return getattr(real, name)

    monkeypatch.setattr(packing.torch.ops, "mkl", Spy(), raising=False)
    return calls


@needs_mkl
def test_fixed_length_decoding_with_packs_equals_without(tiny_model, tiny_sources, monkeypatch):
    model = tiny_model(0)
    src = tiny_sources(1, lengths=(3, 7, 5, 9, 2, 11, 4, 6, 8))  # 9 sentences: greedy runs 9 rows
    monkeypatch.setattr(packing, "MIN_ROWS", 10**9)  # packing off: the reference
    ref_greedy = greedy_decode(model, src, force_len=12, return_scores=True)
    ref_beam = beam_search(model, src, beam_size=3, min_len=12, max_len=12, n_best=3)
    monkeypatch.setattr(packing, "MIN_ROWS", 4)
    calls = _count_packed_calls(monkeypatch)
    got_greedy = greedy_decode(model, src, force_len=12, return_scores=True)
    assert calls and set(calls) == {9}  # packed for the 9 rows, and only used at 9 rows
    calls.clear()
    got_beam = beam_search(model, src, beam_size=3, min_len=12, max_len=12, n_best=3)
    assert calls and set(calls) == {27}
    assert got_greedy.tokens == ref_greedy.tokens
    torch.testing.assert_close(torch.tensor(got_greedy.scores), torch.tensor(ref_greedy.scores), atol=1e-5, rtol=0)
    assert [[h.tokens for h in hs] for hs in got_beam] == [[h.tokens for h in hs] for hs in ref_beam]
    assert not any("forward" in m.__dict__ for m in model.modules())  # the class forward is back everywhere
    calls.clear()
    greedy_decode(model, src, max_len=12)  # batched free decoding: sentences finish early, no packing
    beam_search(model, src, beam_size=3, max_len=12)
    assert calls == []
    one = src[:1]  # beam search over one sentence: its 4 beams run to its end, packed
    ref_one = [[h.tokens for h in hs] for hs in beam_search(model, one, beam_size=4, max_len=12, n_best=4)]
    assert calls and set(calls) == {4}
    monkeypatch.setattr(packing, "MIN_ROWS", 10**9)
    assert [[h.tokens for h in hs] for hs in beam_search(model, one, beam_size=4, max_len=12, n_best=4)] == ref_one
    drop_packs(model)


@needs_mkl
def test_pack_serves_its_row_count_and_retires_on_weight_change():
    torch.manual_seed(0)
    owner = nn.Sequential(nn.Linear(16, 32), nn.ReLU(), nn.Linear(32, 8)).eval()
    x8, x3 = torch.randn(8, 16), torch.randn(3, 16)
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
    drop_packs(owner)


def test_no_packing_with_gradients_in_training_or_below_min_rows():
    owner = nn.Linear(4, 4)
    with packed_linears(owner, [owner], rows=8) as on:  # gradients enabled
        assert not on
    with torch.no_grad():
        with packed_linears(owner.eval(), [owner], rows=2) as on:  # below MIN_ROWS
            assert not on
        with packed_linears(owner.train(), [owner], rows=8) as on:
            assert not on
    assert "forward" not in owner.__dict__

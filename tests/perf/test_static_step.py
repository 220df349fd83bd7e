"""The captured-step study (experiments/decode-capture/capture_step.py): its static-cache step gives the modules'
logits (to 1e-5) at every position, and the same greedy and beam-4 outputs as our searches, eager everywhere and
compiled (torch.compile's inductor) where a C++ compiler exists."""

from __future__ import annotations

import importlib.util
import shutil
from pathlib import Path

import pytest
import torch

from scratchformer.decoding import beam_search, greedy_decode
from scratchformer.decoding.beam import beam_search_core
from scratchformer.decoding.spec import Search

ROOT = Path(__file__).resolve().parents[2]
NEG_INF = float("-inf")


def _script():
    path = ROOT / "experiments" / "decode-capture" / "capture_step.py"
    spec = importlib.util.spec_from_file_location("capture_step", path)
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def _encoded(model, src: list[list[int]], copies: int = 1):
    """(memory, src_mask) of right-padded `src`, each row repeated `copies` times (the beams of a sentence)."""
    ids = torch.tensor([s + [0] * (max(map(len, src)) - len(s)) for s in src]).repeat_interleave(copies, 0)
    mask = model.src_mask(ids)
    return model.encode(ids, mask), mask


def _compiled(step, mode: str):
    if mode == "eager":
        return step
    torch._dynamo.reset()
    return torch.compile(step, fullgraph=True, dynamic=False)


MODES = ["eager", pytest.param("inductor", marks=[pytest.mark.slow, pytest.mark.skipif(
    shutil.which("c++") is None and shutil.which("g++") is None, reason="no C++ compiler: inductor cannot build")])]


def test_static_step_logits_equal_the_modules_at_every_position(tiny_model, tiny_sources):
    cs = _script()
    model = tiny_model(seed=1, norm="post")
    with torch.no_grad():
        memory, mask = _encoded(model, tiny_sources(seed=2, lengths=(5, 9, 3)))
        toks = torch.randint(4, 40, (3, 12), generator=torch.Generator().manual_seed(0))
        ref = cs.reference_logits(model, memory, mask, toks)
        step = cs.StaticStep(model, 3, 16, memory, mask)  # capacity 16: 4 slots stay masked
        for t in range(toks.size(1)):
            torch.testing.assert_close(step(toks[:, t : t + 1], torch.tensor([t])), ref[t], rtol=0, atol=1e-5)


@pytest.mark.parametrize("mode", MODES)
def test_captured_greedy_and_beam4_match_our_searches(tiny_model, tiny_sources, mode):
    cs = _script()
    model = tiny_model(seed=2, norm="post")
    src = tiny_sources(seed=5, lengths=(6,))
    n = 10
    with torch.no_grad():
        # greedy, n forced tokens (EOS and PAD suppressed, as force_len does)
        memory, mask = _encoded(model, src)
        step = _compiled(cs.StaticStep(model, 1, 16, memory, mask), mode)
        tok, got = torch.tensor([[1]]), []
        for t in range(n):
            logits = step(tok, torch.tensor([t])).clone()
            logits[:, [0, 2]] = NEG_INF
            tok = logits.argmax(-1, keepdim=True)
            got.append(int(tok))
        assert got == greedy_decode(model, src, Search(force_len=n))[0]

        # beam 4 over one sentence: 4 rows; the reorder gathers the static caches outside the step
        memory, mask = _encoded(model, src, copies=4)
        static = cs.StaticStep(model, 4, 16, memory, mask)
        beam_step = _compiled(static, mode)
        caches = [b for name, b in static.named_buffers() if name.startswith(("sk", "sv"))]

        def step_fn(tokens, index):
            if index is not None:
                for c in caches:
                    c.copy_(c.index_select(0, index))  # in place: the captured step keeps its buffers
            new = tokens[:, -1:].contiguous()  # one stride every step: no recompilation
            logprobs = torch.log_softmax(beam_step(new, torch.tensor([tokens.size(1) - 1])), dim=-1)
            logprobs[:, 0] = NEG_INF  # PAD, as beam_search does
            return logprobs

        got_beam = beam_search_core(step_fn, [n], Search(beam=4, alpha=0.6, n_best=4))
    want = beam_search(model, src, Search(beam=4, max_output_len=n, n_best=4))
    assert [h.tokens for h in got_beam[0]] == [h.tokens for h in want[0]]
    for a, b in zip(got_beam[0], want[0]):
        assert a.logprob == pytest.approx(b.logprob, abs=1e-4)

"""Beam search: hand-computed cases on a fake model of fixed probabilities, then the real tiny model."""

import math

import pytest
import torch

from scratchformer.decoding.beam import Hypothesis, beam_search, beam_search_core
from scratchformer.decoding.common import length_penalty
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search

PAD, BOS, EOS, A, B, C = 0, 1, 2, 3, 4, 5
V = 6


class FakeModel:
    """Next-token probabilities fixed by the prefix (BOS excluded); unlisted prefixes get `default` (EOS).

    Also checks the step-function contract: each row continues row index[i] of the previous call.
    """

    def __init__(self, table: dict[tuple[int, ...], dict[int, float]], default: dict[int, float] | None = None):
        self.table, self.default, self.previous, self.calls = table, default or {EOS: 1.0}, None, 0

    def __call__(self, tokens: torch.Tensor, index: torch.Tensor | None) -> torch.Tensor:
        if self.previous is not None:
            assert index is not None and index.numel() == tokens.size(0)
            assert torch.equal(tokens[:, :-1], self.previous.index_select(0, index))
        assert (tokens[:, 0] == BOS).all()
        self.previous, self.calls = tokens.clone(), self.calls + 1
        probs = torch.zeros(tokens.size(0), V, dtype=torch.float64)
        for r, row in enumerate(tokens[:, 1:].tolist()):
            for tok, p in self.table.get(tuple(row), self.default).items():
                probs[r, tok] = p
        return probs.log()  # log(0) = -inf: impossible tokens


def search(table, beam, alpha=0.0, max_len=10, n_best=None, batch=1, min_len=0, default=None):
    fake = FakeModel(table, default)
    spec = Search(beam=beam, alpha=alpha, bos=BOS, eos=EOS, n_best=n_best or beam, min_len=min_len)
    return beam_search_core(fake, [max_len] * batch, spec)


# Greedy takes A (0.6) but then finds only A A (0.6 * 0.45); B B (0.4 * 0.9) is more likely as a whole.
GARDEN_PATH = {
    (): {A: 0.6, B: 0.4},
    (A,): {A: 0.45, B: 0.30, EOS: 0.25},
    (B,): {B: 0.90, A: 0.05, EOS: 0.05},
}


def test_beam_2_finds_the_sequence_greedy_misses():
    (best, second), = search(GARDEN_PATH, beam=2)
    assert best == Hypothesis([B, B], math.log(0.4 * 0.9), math.log(0.4 * 0.9))
    assert second == Hypothesis([A, A], math.log(0.6 * 0.45), math.log(0.6 * 0.45))
    (greedy,), = search(GARDEN_PATH, beam=1)
    assert greedy.tokens == [A, A] and greedy.logprob == pytest.approx(math.log(0.27), rel=1e-12)


# Short: A EOS (0.5 * 0.6 = 0.3). Long: B B B EOS (0.4 * 0.9^3 = 0.2916), less likely but longer.
SHORT_VS_LONG = {
    (): {A: 0.5, B: 0.4, EOS: 0.1},
    (A,): {EOS: 0.6, A: 0.4},
    (B,): {B: 0.9, EOS: 0.1},
    (B, B): {B: 0.9, EOS: 0.1},
    (B, B, B): {EOS: 0.9, B: 0.1},
}


def test_length_penalty_changes_the_winner():
    (short, *_), = search(SHORT_VS_LONG, beam=2, alpha=0.0)
    assert short.tokens == [A]
    assert short.score == short.logprob == pytest.approx(math.log(0.3), rel=1e-12)
    (long, *_), = search(SHORT_VS_LONG, beam=2, alpha=0.6)
    assert long.tokens == [B, B, B]
    assert long.logprob == pytest.approx(math.log(0.4 * 0.9**3), rel=1e-12)
    assert long.score == pytest.approx(math.log(0.2916) / ((5 + 4) / 6) ** 0.6, rel=1e-12)  # |Y| = 3 + EOS
    ranked = search(SHORT_VS_LONG, beam=2, alpha=0.6)[0]
    assert [h.tokens for h in ranked] == [[B, B, B], [A]]
    assert ranked[1].score == pytest.approx(math.log(0.3) / (7 / 6) ** 0.6, rel=1e-12)  # |Y| = 1 + EOS


def test_length_penalty_formula():
    assert length_penalty(1, 0.6) == pytest.approx((6 / 6) ** 0.6)
    assert length_penalty(10, 0.6) == pytest.approx((15 / 6) ** 0.6)
    assert length_penalty(10, 0.0) == 1.0


def test_eos_outside_the_first_k_candidates_does_not_close_a_hypothesis():
    # the empty output (EOS first, 0.35) beats A A (0.4 * 0.6 = 0.24), but EOS is only 2nd of the candidates
    table = {(): {A: 0.4, EOS: 0.35, B: 0.25}, (A,): {A: 0.6, B: 0.4}}
    (hyp,), = search(table, beam=1)
    assert hyp.tokens == [A, A] and hyp.logprob == pytest.approx(math.log(0.24), rel=1e-12)
    (hyp, *_), = search(table, beam=2)  # within the first K = 2: it closes, and wins
    assert hyp == Hypothesis([], math.log(0.35), math.log(0.35))


def test_step_0_expands_only_the_first_beam():
    uniform = {(): {A: 0.25, B: 0.25, C: 0.25, EOS: 0.25}, (A,): {EOS: 1.0}, (B,): {EOS: 1.0}, (C,): {EOS: 1.0}}
    hyps = search(uniform, beam=3)[0]
    assert sorted(tuple(h.tokens) for h in hyps) == sorted({tuple(h.tokens) for h in hyps})  # no duplicates
    assert len(hyps) == 3


def test_budget_cuts_live_beams_without_eos():
    hyps = search({}, beam=2, alpha=0.6, max_len=4, n_best=2, default={A: 0.6, B: 0.4})[0]  # never EOS
    assert hyps[0].tokens == [A, A, A, A] and len(hyps[1].tokens) == 4 and hyps[1].tokens.count(B) == 1
    assert [h.logprob for h in hyps] == pytest.approx([4 * math.log(0.6), 3 * math.log(0.6) + math.log(0.4)])
    for h in hyps:  # no EOS: |Y| = 4 tokens
        assert h.score == pytest.approx(h.logprob / ((5 + 4) / 6) ** 0.6, rel=1e-12)


def test_min_len_suppresses_eos():
    (hyp, *_), = search(SHORT_VS_LONG, beam=2, alpha=0.0, min_len=2)
    assert len(hyp.tokens) >= 2


def test_sentences_of_a_batch_are_independent_and_finish_at_different_steps():
    fake = FakeModel(SHORT_VS_LONG)
    hyps = beam_search_core(fake, [10, 2, 10], Search(beam=2, alpha=0.6, bos=BOS, eos=EOS, n_best=1))
    assert [h[0].tokens for h in hyps] == [[B, B, B], [B, B], [B, B, B]]
    # budget 2: B B is cut there, no EOS, |Y| = 2, and beats the closed A EOS (|Y| = 2 too)
    assert hyps[1][0].score == pytest.approx(math.log(0.4 * 0.9) / (7 / 6) ** 0.6, rel=1e-12)
    assert math.log(0.4 * 0.9) > math.log(0.5 * 0.6)


def test_bad_arguments():
    with pytest.raises(ValueError, match="n_best"):
        search(GARDEN_PATH, beam=2, n_best=3)


# -- the real tiny model ----------------------------------------------------------------------------------------


def scores(results: list[list[Hypothesis]]) -> list[float]:
    return [h.score for hyps in results for h in hyps]


def test_beam_1_equals_greedy(seq2seq, random_sources):
    src = random_sources(4)
    greedy = greedy_decode(seq2seq, src, Search(max_output_len=12), return_scores=True)
    for alpha in (0.0, 0.6, 1.0):
        beam = beam_search(seq2seq, src, Search(beam=1, alpha=alpha, max_output_len=12))
        assert [h[0].tokens for h in beam] == greedy.tokens
        assert [h[0].logprob for h in beam] == pytest.approx(greedy.scores, abs=1e-4)


def test_cached_beam_equals_uncached_beam(seq2seq, random_sources):
    src = random_sources(5)
    cached = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=3))
    full = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=3, use_cache=False))
    assert [[h.tokens for h in s] for s in cached] == [[h.tokens for h in s] for s in full]
    assert scores(cached) == pytest.approx(scores(full), abs=1e-4)


def test_beam_sentence_alone_equals_sentence_in_batch(seq2seq, random_sources):
    src = random_sources(6)
    batch = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=2))
    alone = [beam_search(seq2seq, [s], Search(beam=3, max_output_len=10, n_best=2))[0] for s in src]
    assert [[h.tokens for h in s] for s in batch] == [[h.tokens for h in s] for s in alone]
    assert scores(batch) == pytest.approx(scores(alone), abs=1e-4)


def test_beam_is_at_least_as_good_as_greedy_and_sorted(make_seq2seq, random_sources):
    model, src = make_seq2seq(2), random_sources(7)
    greedy = greedy_decode(model, src, Search(max_output_len=10), return_scores=True)
    beam = beam_search(model, src, Search(beam=4, alpha=0.0, max_output_len=10, n_best=4))
    for hyps, g_score in zip(beam, greedy.scores):
        assert [h.score for h in hyps] == sorted((h.score for h in hyps), reverse=True)
        assert hyps[0].score >= g_score - 1e-4


def _random_logprobs(prefix: tuple[int, ...], seed: int, vocab: int, eos_bias: float) -> list[float]:
    """A fixed random next-token distribution per prefix (float64, no ties; PAD impossible)."""
    g = torch.Generator().manual_seed(hash((seed, prefix)) % (2**31))
    logits = torch.randn(vocab, generator=g, dtype=torch.float64)
    logits[EOS] += eos_bias
    logits[PAD] = -math.inf
    return torch.log_softmax(logits, 0).tolist()


def _plain_beam(logprobs, k: int, limit: int, alpha: float, min_len: int) -> list[tuple[list[int], float]]:
    """The module docstring's search for one sentence, in plain Python: the oracle of beam_search_core."""
    beams = [([], 0.0)] + [([], -math.inf)] * (k - 1)  # step 0: only beam 0 is live
    finished: list[tuple[list[int], float]] = []
    for t in range(limit):
        cands = []
        for b, (toks, score) in enumerate(beams):
            for v, lp_v in enumerate(logprobs(tuple(toks))):
                if v == EOS and t < min_len:
                    lp_v = -math.inf
                cands.append((score + lp_v, b * 10_000 + v, toks, v))
        top = sorted(cands, key=lambda c: (-c[0], c[1]))[: 2 * k]
        lp = length_penalty(t + 1, alpha)
        finished += [(toks, val / lp) for val, _, toks, v in top[:k] if v == EOS and val > -math.inf]
        live = [(toks + [v], val) for val, _, toks, v in top if v != EOS][:k]
        kth = sorted((s for _, s in finished), reverse=True)[k - 1] if len(finished) >= k else -math.inf
        if t + 1 >= limit:  # budget reached: the live beams are hypotheses too
            finished += [(toks, val / lp) for toks, val in live if val > -math.inf]
            break
        if live[0][1] / lp <= kth:
            break
        beams = live
    return sorted(finished, key=lambda h: -h[1])


@pytest.mark.parametrize("seed", range(12))
def test_batched_search_equals_a_plain_search_of_each_sentence(seed):
    """beam_search_core over a batch (sentences finishing at different steps, EOS inside and outside the first K,
    the common step where no EOS is among the first K) gives each sentence what a plain per-sentence search gives."""
    rng = torch.Generator().manual_seed(seed)
    k, vocab = 1 + seed % 4, 6 + seed % 3
    batch = 1 + int(torch.randint(4, (1,), generator=rng))
    limits = torch.randint(1, 8, (batch,), generator=rng).tolist()
    alpha, min_len = [0.0, 0.6, 1.5][seed % 3], seed % 2
    biases = torch.linspace(-2.0, 1.5, batch).tolist()  # some sentences end early, some run to their budget

    row_sentence = torch.arange(batch).repeat_interleave(k)  # followed through `index`, as a KV cache is

    def step_fn(tokens, index):
        nonlocal row_sentence
        if index is not None:
            row_sentence = row_sentence[index]
        return torch.tensor([_random_logprobs(tuple(row[1:]), seed * 100 + s, vocab, biases[s])
                             for row, s in zip(tokens.tolist(), row_sentence.tolist())], dtype=torch.float64)

    batched = beam_search_core(step_fn, limits, Search(beam=k, alpha=alpha, bos=BOS, eos=EOS, n_best=k,
                                                       min_len=min_len))
    plain = [_plain_beam(lambda p, s=s: _random_logprobs(p, seed * 100 + s, vocab, biases[s]), k, limits[s],
                         alpha, min_len) for s in range(batch)]
    for hyps, oracle in zip(batched, plain):
        assert [h.tokens for h in hyps] == [toks for toks, _ in oracle[:k]]
        assert [h.score for h in hyps] == pytest.approx([s for _, s in oracle[:k]], rel=1e-12)

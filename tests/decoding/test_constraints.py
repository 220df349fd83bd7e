"""Repetition rules and forced prefixes (constraints.py) in greedy and beam search, on tiny random models."""

import math

import pytest
import torch

from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.constraints import Constraints, banned_ngram_tokens, penalize_repeats
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.errors import ConfigError

BOS, EOS = 1, 2


def repeated_ngrams(tokens: list[int], n: int) -> list[tuple[int, ...]]:
    grams = [tuple(tokens[i: i + n]) for i in range(len(tokens) - n + 1)]
    return sorted({g for g in grams if grams.count(g) > 1})


@pytest.fixture(scope="module")
def chatty(make_seq2seq):
    """A tiny model that never emits EOS: 12-token outputs over a 30-token vocabulary, with repeats."""
    model = make_seq2seq(2)
    with torch.no_grad():
        model.generator.proj.bias[EOS] = -1e4
    return model


def teacher_forced_logprob(model, src: list[int], tokens: list[int], eos: bool) -> float:
    tgt = torch.tensor([[BOS, *tokens, *([EOS] if eos else [])]])
    logprobs = model(torch.tensor([src]), tgt[:, :-1]).log_softmax(-1)  # (1, L, V)
    return logprobs.gather(-1, tgt[:, 1:, None]).sum().item()


# -- the rules alone -----------------------------------------------------------------------------------------------


def test_banned_ngram_tokens_is_fairseqs_rule():
    hyps = torch.tensor([[5, 6, 7, 5, 6], [5, 6, 7, 8, 9]])  # row 0 ends in "5 6", which 7 followed before
    banned = banned_ngram_tokens(hyps, 3, 10)
    assert banned[0].nonzero().flatten().tolist() == [7] and not banned[1].any()
    assert banned_ngram_tokens(hyps, 2, 10)[0].nonzero().flatten().tolist() == [7]  # "6" was followed by 7
    assert banned_ngram_tokens(hyps, 1, 10)[1].nonzero().flatten().tolist() == [5, 6, 7, 8, 9]  # every seen token
    assert not banned_ngram_tokens(hyps[:, :2], 3, 10).any()  # shorter than n: nothing to repeat
    assert not banned_ngram_tokens(hyps, 0, 10).any()


def test_repetition_penalty_divides_positive_and_multiplies_negative_logits():
    logits = torch.tensor([[2.0, -2.0, 1.0, 0.5]])
    out = penalize_repeats(logits, torch.tensor([[0, 1, 1]]), 2.0)  # token 1 twice: penalized once
    assert out.tolist() == [[1.0, -4.0, 1.0, 0.5]]
    assert penalize_repeats(logits, torch.tensor([[0, 1]]), 1.0) is logits


def test_a_forced_token_keeps_its_log_prob_and_beats_the_bans():
    c = Constraints(no_repeat_ngram=1, prefixes=[[3], []])
    logits = torch.tensor([[0.0, 0.0, 1.0, 2.0], [0.0, 0.0, 1.0, 2.0]])
    hyps = torch.tensor([[3], [3]])  # token 3 seen: banned by n = 1, but row 0 must emit it (its prefix is [3])
    out = c.logprobs(logits, hyps[:, :0], torch.tensor([0, 1]), pad=0)  # step 0
    expected = logits.log_softmax(-1)
    assert out[0].tolist() == [-math.inf, -math.inf, -math.inf, expected[0, 3].item()]
    assert out[1, 3] == expected[1, 3] and out[1, 0] == -math.inf  # row 1 free; PAD banned
    out = Constraints(no_repeat_ngram=1).logprobs(logits, hyps, torch.tensor([0, 1]), pad=0)
    assert (out[:, 3] == -math.inf).all()


@pytest.mark.parametrize("kwargs,message", [
    (dict(no_repeat_ngram=-1), "n-gram size"),
    (dict(no_repeat_ngram=2.5), "n-gram size"),
    (dict(repetition_penalty=0.0), "positive"),
    (dict(repetition_penalty=-1.2), "positive"),
    (dict(repetition_penalty=float("nan")), "positive"),
    (dict(repetition_penalty=1e-300), r"in \[0.01, 100\]"),  # logits / P would overflow
    (dict(repetition_penalty=1e3), r"in \[0.01, 100\]"),
])
def test_bad_options_are_one_line_errors(kwargs, message):
    with pytest.raises(ConfigError, match=message):
        Constraints(**kwargs)


def test_prefix_count_and_length_are_checked(make_seq2seq, random_sources):
    model, src = make_seq2seq(0, max_len=20), random_sources(0, lengths=(3, 4))
    with pytest.raises(ConfigError, match="one per sentence"):
        greedy_decode(model, src, prefixes=[[5]])
    with pytest.raises(ConfigError, match="longer than the model's max_len=20"):
        beam_search(model, src, Search(beam=4), prefixes=[[5] * 21, []])


# -- in the searches ---------------------------------------------------------------------------------------------


def test_no_repeat_ngram_removes_repeats_in_greedy_and_beam(chatty, random_sources):
    src = random_sources(1)
    plain = greedy_decode(chatty, src, Search(max_output_len=12))
    assert sum(bool(repeated_ngrams(t, 2)) for t in plain) >= 3  # the test needs repeats to remove
    for n in (1, 2, 3):
        for tokens in greedy_decode(chatty, src, Search(max_output_len=12, no_repeat_ngram=n)):
            assert len(tokens) == 12 and repeated_ngrams(tokens, n) == []
        for hyps in beam_search(chatty, src, Search(beam=3, max_output_len=12, n_best=3, no_repeat_ngram=n)):
            assert all(repeated_ngrams(h.tokens, n) == [] for h in hyps)


def test_repetition_penalty_lowers_repeats(chatty, random_sources):
    src = random_sources(1)
    count = lambda outs: sum(len(t) - len(set(t)) for t in outs)  # noqa: E731
    plain = count(greedy_decode(chatty, src, Search(max_output_len=12)))
    assert count(greedy_decode(chatty, src, Search(max_output_len=12, repetition_penalty=3.0))) < plain
    favoured = count(greedy_decode(chatty, src, Search(max_output_len=12, repetition_penalty=0.5)))
    assert favoured > plain  # P < 1 favours repeats


@pytest.mark.parametrize("options", [dict(no_repeat_ngram=2), dict(repetition_penalty=1.5),
                                     dict(prefixes=[[5, 6], [], [7], [8, 8, 8], [], [9]]),
                                     dict(no_repeat_ngram=3, repetition_penalty=1.3, prefixes=[[5]] * 6)])
def test_beam_1_equals_greedy_with_constraints(seq2seq, random_sources, options):
    src = random_sources(4)
    prefixes, rules = options.pop("prefixes", None), options
    greedy = greedy_decode(seq2seq, src, Search(max_output_len=12, **rules), prefixes, return_scores=True)
    beam = beam_search(seq2seq, src, Search(beam=1, alpha=0.0, max_output_len=12, **rules), prefixes)
    assert [h[0].tokens for h in beam] == greedy.tokens
    assert [h[0].logprob for h in beam] == pytest.approx(greedy.scores, abs=1e-4)


@pytest.mark.parametrize("options", [dict(no_repeat_ngram=2, repetition_penalty=1.4),
                                     dict(prefixes=[[5, 6], [], [7], [8, 8, 8], [], [9, 10, 11, 12]])])
def test_sentence_alone_equals_sentence_in_batch_with_constraints(seq2seq, random_sources, options):
    """Sentences finish at different steps and leave the batch: each row must keep its own prefix."""
    src = random_sources(6)
    prefixes, rules = options.pop("prefixes", None), options
    alone = lambda i: [prefixes[i]] if prefixes else None  # noqa: E731
    greedy = greedy_decode(seq2seq, src, Search(max_output_len=10, **rules), prefixes)
    assert greedy == [greedy_decode(seq2seq, [s], Search(max_output_len=10, **rules), alone(i))[0]
                      for i, s in enumerate(src)]
    spec = Search(beam=3, max_output_len=10, n_best=2, **rules)
    batch = beam_search(seq2seq, src, spec, prefixes)
    each = [beam_search(seq2seq, [s], spec, alone(i))[0] for i, s in enumerate(src)]
    assert [[h.tokens for h in s] for s in batch] == [[h.tokens for h in s] for s in each]
    cached_off = beam_search(seq2seq, src, Search(beam=3, max_output_len=10, n_best=2, use_cache=False, **rules),
                             prefixes)
    assert [[h.tokens for h in s] for s in batch] == [[h.tokens for h in s] for s in cached_off]


def test_prefix_is_forced_kept_and_scored(make_seq2seq, random_sources):
    model, src = make_seq2seq(2), random_sources(3, lengths=(3, 7, 5))
    prefixes = [[9, 9, 9], [], [4, 20]]
    for tokens, p in zip(greedy_decode(model, src, Search(max_output_len=12), prefixes=prefixes), prefixes):
        assert tokens[: len(p)] == p
    for s, hyps, p in zip(src, beam_search(model, src, Search(beam=3, max_output_len=12, n_best=3), prefixes=prefixes),
                          prefixes):
        for h in hyps:
            assert h.tokens[: len(p)] == p
            expected = teacher_forced_logprob(model, s, h.tokens, eos=len(h.tokens) < 12)
            assert h.logprob == pytest.approx(expected, abs=1e-4)  # the prefix's own log-probs count


def test_a_prefix_with_a_repeat_is_forced_through_no_repeat_ngram(chatty, random_sources):
    src = random_sources(0, lengths=(4,))
    prefix = [5, 6, 7, 5, 6, 7]
    (tokens,) = greedy_decode(chatty, src, Search(max_output_len=12, no_repeat_ngram=3), prefixes=[prefix])
    assert tokens[:6] == prefix and repeated_ngrams(tokens[5:], 3) == []
    (hyp, *_), = beam_search(chatty, src, Search(beam=2, max_output_len=12, no_repeat_ngram=3), prefixes=[prefix])
    assert hyp.tokens[:6] == prefix


def test_the_budget_grows_to_hold_a_prefix(chatty, random_sources):
    src = random_sources(0, lengths=(2,))
    (tokens,) = greedy_decode(chatty, src, Search(max_output_len=3), prefixes=[[5] * 6])
    assert tokens == [5] * 6  # the prefix alone: max_len 3 < its 6 tokens
    (hyp,), = beam_search(chatty, src, Search(beam=2, max_output_len=3), prefixes=[[5] * 6])
    assert hyp.tokens == [5] * 6

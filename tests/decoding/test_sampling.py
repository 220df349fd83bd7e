"""Sampling from a decoder-only model: seeds, greedy limits, filters, batching, cache, streaming, truncation."""

import dataclasses

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.decoding.sampling import Sampling, pick_next, sample

PROMPTS = [[1, 5, 9, 13], [1, 7], [1, 20, 30, 40, 41, 42, 43], [1]]


@pytest.fixture(scope="module")
def gpt():
    torch.manual_seed(0)
    return build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=50, dropout=0.0)).eval()


def reference_greedy(model, prompt, n):
    """The plainest loop: re-run the whole sequence, take the argmax."""
    ids = list(prompt)
    for _ in range(n):
        ids.append(int(model(torch.tensor([ids]))[0, -1].argmax()))
    return ids[len(prompt):]


def test_greedy_matches_the_plain_loop_and_is_not_trivial(gpt):
    out = sample(gpt, PROMPTS, Sampling(max_new_tokens=12, temperature=0))
    assert out == [reference_greedy(gpt, p, 12) for p in PROMPTS]
    assert max(len(set(t)) for t in out) >= 3


def test_temperature_zero_and_top_k_1_equal_greedy(gpt):
    greedy = sample(gpt, PROMPTS, Sampling(max_new_tokens=10, temperature=0.0))
    assert sample(gpt, PROMPTS, Sampling(max_new_tokens=10, temperature=-1.0)) == greedy
    assert sample(gpt, PROMPTS, Sampling(max_new_tokens=10, temperature=0.7, top_k=1, seed=3)) == greedy
    one_token = Sampling(max_new_tokens=10, temperature=1.0, top_p=1e-6, seed=3)  # a nucleus of one token
    assert sample(gpt, PROMPTS, one_token) == greedy


def test_seed_reproducible(gpt):
    a = sample(gpt, PROMPTS, Sampling(max_new_tokens=15, seed=123))
    assert sample(gpt, PROMPTS, Sampling(max_new_tokens=15, seed=123)) == a
    assert sample(gpt, PROMPTS, Sampling(max_new_tokens=15, seed=124)) != a
    assert a != sample(gpt, PROMPTS, Sampling(max_new_tokens=15, temperature=0))


def test_top_p_and_top_k_validation(gpt):
    for bad in (0.0, -0.1, 1.5):
        with pytest.raises(ValueError, match=r"top_p=.* must be in \(0, 1\]"):
            sample(gpt, PROMPTS, Sampling(max_new_tokens=3, top_p=bad))
    with pytest.raises(ValueError, match="top_k"):
        sample(gpt, PROMPTS, Sampling(max_new_tokens=3, top_k=0))
    assert len(sample(gpt, PROMPTS, Sampling(max_new_tokens=3, top_p=1.0, seed=0))[0]) == 3


def test_batched_prompts_of_different_lengths_equal_each_alone(gpt):
    batch = sample(gpt, PROMPTS, Sampling(max_new_tokens=10, temperature=0))
    assert batch == [sample(gpt, [p], Sampling(max_new_tokens=10, temperature=0))[0] for p in PROMPTS]


def test_cache_equals_no_cache(gpt):
    for spec in (Sampling(max_new_tokens=12, temperature=0), Sampling(max_new_tokens=12, seed=7)):
        assert sample(gpt, PROMPTS, spec) == sample(gpt, PROMPTS, dataclasses.replace(spec, use_cache=False))


def test_eos_stops_a_row_and_is_not_returned(gpt):
    greedy = sample(gpt, PROMPTS, Sampling(max_new_tokens=12, temperature=0))
    eos = greedy[0][4]  # make the 5th greedy token of row 0 the "EOS"
    out = sample(gpt, PROMPTS, Sampling(max_new_tokens=12, temperature=0, eos=eos))
    for full, cut in zip(greedy, out):
        expected = full[: full.index(eos)] if eos in full else full
        assert cut == expected
    assert out == sample(gpt, PROMPTS, Sampling(max_new_tokens=12, temperature=0, eos=eos, use_cache=False))


def test_streaming_callback_sees_every_token_in_order(gpt):
    seen: dict[int, list[int]] = {}
    out = sample(gpt, PROMPTS, Sampling(max_new_tokens=8, seed=5, eos=3),
                 on_token=lambda row, tok: seen.setdefault(row, []).append(tok))
    assert [seen.get(r, []) for r in range(len(PROMPTS))] == out


def test_long_prompt_truncated_left_or_refused():
    torch.manual_seed(0)
    model = build_model(ModelConfig.preset("gpt-tiny", tgt_vocab_size=50, dropout=0.0, max_len=16)).eval()
    long = list(range(4, 24))  # 20 tokens; with 5 new ones only 12 fit
    with pytest.warns(UserWarning, match="cut 1 prompt"):
        out = sample(model, [long, [1, 2]], Sampling(max_new_tokens=5, temperature=0))
    assert out[0] == sample(model, [long[-12:]], Sampling(max_new_tokens=5, temperature=0))[0]
    with pytest.raises(ValueError, match="truncate='left'"):
        sample(model, [long], Sampling(max_new_tokens=5, truncate="error"))
    with pytest.raises(ValueError, match="does not fit"):
        sample(model, [[1]], Sampling(max_new_tokens=40))


def test_empty_prompt_refused_and_zero_new_tokens(gpt):
    with pytest.raises(ValueError, match="at least one token"):
        sample(gpt, [[1], []], Sampling(max_new_tokens=3))
    assert sample(gpt, PROMPTS, Sampling(max_new_tokens=0)) == [[], [], [], []]


def test_pick_next_filters():
    logits = torch.tensor([[0.0, 1.0, 2.0, 3.0, -1.0]]).repeat(2000, 1)  # (N, V)
    g = torch.Generator().manual_seed(0)
    top2 = pick_next(logits, 1.0, top_k=2, generator=g)
    assert set(top2.tolist()) == {2, 3}
    # probabilities ~ [0.03, 0.09, 0.23, 0.64, 0.01]: top_p=0.8 keeps {3, 2}; 0.5 keeps {3}
    assert set(pick_next(logits, 1.0, top_p=0.8, generator=g).tolist()) == {2, 3}
    assert set(pick_next(logits, 1.0, top_p=0.5, generator=g).tolist()) == {3}
    assert set(pick_next(logits, 1.0, generator=g).tolist()) == {0, 1, 2, 3, 4}
    hot = pick_next(logits, 100.0, generator=g)  # high temperature: near uniform
    assert (hot == 4).float().mean() > 0.1

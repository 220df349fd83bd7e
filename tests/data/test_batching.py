"""Tests for scratchformer.data.batching: token budget, coverage, sharding, determinism, collation."""

from __future__ import annotations

import random
import warnings

import pytest
import torch
from hypothesis import given, settings
from hypothesis import strategies as st

from scratchformer.data.batching import (
    collate_lm,
    collate_pairs,
    encode_pairs,
    pad_efficiency,
    random_batches,
    token_batches,
)
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID, train_tokenizer


def toy_lengths(n: int = 5000, seed: int = 0) -> list[int]:
    rng = random.Random(seed)
    return [rng.randint(5, 60) for _ in range(n)]


def toy_pair_lengths(n: int = 5000, seed: int = 0) -> list[tuple[int, int]]:
    """Target about as long as the source (+-20%), as in real translation data."""
    rng = random.Random(seed)
    out = []
    for _ in range(n):
        s = rng.randint(5, 60)
        out.append((s, max(2, round(s * rng.uniform(0.8, 1.2)))))
    return out


def cost(i: int, lengths) -> int:
    x = lengths[i]
    return max(x) if isinstance(x, tuple) else x


lengths_st = st.one_of(
    st.lists(st.integers(1, 120), min_size=1, max_size=300),
    st.lists(st.tuples(st.integers(1, 120), st.integers(1, 120)), min_size=1, max_size=300),
)


@settings(max_examples=150, deadline=None)
@given(lengths_st, st.integers(1, 1000), st.booleans(), st.integers(0, 10**6), st.sampled_from([None, 1, 8]))
def test_budget_respected_and_every_index_once(lengths, max_tokens, shuffle, seed, bucket_width) -> None:
    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        batches = token_batches(lengths, max_tokens, shuffle, seed, bucket_width=bucket_width)
    for b in batches:
        assert b
        longest = max(cost(i, lengths) for i in b)
        assert len(b) * longest <= max_tokens or len(b) == 1  # a lone over-long example is allowed
    flat = [i for b in batches for i in b]
    assert sorted(flat) == list(range(len(lengths)))


def test_over_long_example_own_batch_and_warns_once() -> None:
    with pytest.warns(UserWarning, match="2 example") as record:
        batches = token_batches([5, 500, 5, 700, 5], max_tokens=100, shuffle=False, seed=0)
    assert len(record) == 1
    assert [1] in batches and [3] in batches


@settings(max_examples=50, deadline=None)
@given(st.lists(st.integers(1, 50), min_size=1, max_size=400), st.integers(50, 500), st.integers(1, 8))
def test_ranks_disjoint_equal_count(lengths, max_tokens, world_size) -> None:
    shards = [
        token_batches(lengths, max_tokens, True, 7, 3, rank=r, world_size=world_size)
        for r in range(world_size)
    ]
    all_batches = token_batches(lengths, max_tokens, True, 7, 3)
    assert len({len(s) for s in shards}) == 1
    assert len(shards[0]) == len(all_batches) // world_size
    seen = [i for s in shards for b in s for i in b]
    assert len(seen) == len(set(seen))  # disjoint
    kept = {tuple(b) for b in all_batches}
    assert all(tuple(b) in kept for s in shards for b in s)  # shards are the same global batches


def test_bad_rank() -> None:
    with pytest.raises(ValueError, match="rank"):
        token_batches([1, 2], 10, True, 0, rank=2, world_size=2)


def test_deterministic_and_epoch_changes_order() -> None:
    lengths = toy_lengths(2000)
    a = token_batches(lengths, 2000, True, seed=1, epoch=0)
    assert a == token_batches(lengths, 2000, True, seed=1, epoch=0)
    b = token_batches(lengths, 2000, True, seed=1, epoch=1)
    assert a != b
    assert sorted(i for x in b for i in x) == sorted(i for x in a for i in x)


def test_equal_lengths_are_mixed_by_seed() -> None:
    lengths = [10] * 100
    a = token_batches(lengths, 100, True, seed=0)
    b = token_batches(lengths, 100, True, seed=1)
    assert {frozenset(x) for x in a} != {frozenset(x) for x in b}


def test_no_shuffle_goes_shortest_first() -> None:
    lengths = toy_lengths(500)
    batches = token_batches(lengths, 1000, False, seed=123)
    maxes = [max(lengths[i] for i in b) for b in batches]
    assert maxes == sorted(maxes)
    assert batches == token_batches(lengths, 1000, False, seed=999)


@pytest.mark.parametrize("make", [toy_lengths, toy_pair_lengths])
def test_bucketing_pads_far_less_than_random(make) -> None:
    lengths = make()
    bucketed = token_batches(lengths, 2000, True, seed=0)
    mean_bs = round(len(lengths) / len(bucketed))
    rand = random_batches(len(lengths), mean_bs, seed=0)
    eff_bucket, eff_rand = pad_efficiency(bucketed, lengths), pad_efficiency(rand, lengths)
    assert eff_bucket >= 0.90
    assert eff_rand < eff_bucket - 0.2


def test_bucket_width_keeps_budget_and_efficiency() -> None:
    lengths = toy_lengths()
    batches = token_batches(lengths, 2000, True, seed=0, bucket_width=4)
    assert all(len(b) * max(lengths[i] for i in b) <= 2000 for b in batches)
    assert pad_efficiency(batches, lengths) >= 0.85


def test_random_batches_cover_and_deterministic() -> None:
    b = random_batches(103, 10, seed=3, epoch=2)
    assert [len(x) for x in b] == [10] * 10 + [3]
    assert sorted(i for x in b for i in x) == list(range(103))
    assert b == random_batches(103, 10, seed=3, epoch=2) != random_batches(103, 10, seed=3, epoch=3)


def test_pad_efficiency_closed_form() -> None:
    assert pad_efficiency([[0, 1]], [2, 4]) == pytest.approx(6 / 8)
    # pairs: src side 2+4 of 8, tgt side 3+3 of 6 -> 12 / 14
    assert pad_efficiency([[0, 1]], [(2, 3), (4, 3)]) == pytest.approx(12 / 14)


def test_collate_pairs_shapes_and_shift() -> None:
    ex = [([5, 6, 7, EOS_ID], [BOS_ID, 8, 9, EOS_ID]), ([5, EOS_ID], [BOS_ID, 8, 9, 10, 11, EOS_ID])]
    out = collate_pairs(ex)
    assert out["src"].shape == (2, 4) and out["src"].dtype == torch.long
    assert out["tgt_in"].shape == out["tgt_out"].shape == (2, 5)
    assert out["src"][1].tolist() == [5, EOS_ID, PAD_ID, PAD_ID]  # right padding
    assert out["tgt_in"][0].tolist() == [BOS_ID, 8, 9, EOS_ID, PAD_ID]
    assert out["tgt_out"][0].tolist() == [8, 9, EOS_ID, PAD_ID, PAD_ID]
    assert out["tgt_in"][1].tolist() == [BOS_ID, 8, 9, 10, 11]
    assert out["tgt_out"][1].tolist() == [8, 9, 10, 11, EOS_ID]
    assert torch.equal(out["tgt_in"][:, 1:], out["tgt_out"][:, :-1])  # shifted by one
    assert int(out["n_tokens"]) == 3 + 5


def test_collate_rejects_bad_targets() -> None:
    with pytest.raises(ValueError, match="at least"):
        collate_pairs([([5, EOS_ID], [BOS_ID])])


def test_collate_lm() -> None:
    out = collate_lm([[1, 5, 6, 2], [1, 7, 2]], pad_id=0)
    assert out["input_ids"].tolist() == [[1, 5, 6], [1, 7, 2]]
    assert out["labels"].tolist() == [[5, 6, 2], [7, 2, 0]]
    assert int(out["n_tokens"]) == 5


def test_encode_pairs_specials_and_max_len() -> None:
    tok = train_tokenizer("char", ["abcdef", "你好吗"])
    pairs = [("ab", "你好"), ("abcdef", "你"), ("a", "你好吗你好吗")]
    out = encode_pairs(pairs, tok, tok, max_len=None)
    assert out[0] == (tok.encode("ab") + [EOS_ID], [BOS_ID] + tok.encode("你好") + [EOS_ID])
    with pytest.warns(UserWarning, match="dropped 2 of 3"):
        kept = encode_pairs(pairs, tok, tok, max_len=4)
    assert kept == [out[0]]

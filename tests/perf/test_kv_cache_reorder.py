"""KVCache.reorder gathers into a rotating spare buffer: the same rows as an index_select, no allocation."""

import torch

from scratchformer.model.attention import KVCache
from scratchformer.model.decoder import DecoderCache


def _filled(b=4, h=2, n=5, d=3, seed=0) -> KVCache:
    g = torch.Generator().manual_seed(seed)
    cache = KVCache()
    for _ in range(n):
        cache.append(torch.randn(b, h, 1, d, generator=g), torch.randn(b, h, 1, d, generator=g))
    return cache


def test_reorder_equals_index_select_and_hands_back_its_buffers():
    cache = _filled()
    k, v = cache.get()
    expect_k, expect_v = k.index_select(0, torch.tensor([2, 2, 0, 1])), v.index_select(0, torch.tensor([2, 2, 0, 1]))
    old = (cache.k, cache.v)
    spare = (torch.empty_like(cache.k), torch.empty_like(cache.v))
    returned = cache.reorder(torch.tensor([2, 2, 0, 1]), spare)
    assert cache.k is spare[0] and cache.v is spare[1]  # gathered straight into the spare
    assert returned[0] is old[0] and returned[1] is old[1]  # the old buffers become the next spare
    got_k, got_v = cache.get()
    assert torch.equal(got_k, expect_k) and torch.equal(got_v, expect_v)


def test_shrinking_reorder_allocates_and_appends_continue():
    cache = _filled()
    keep = torch.tensor([3, 1])
    k_before = cache.get()[0].index_select(0, keep)
    assert cache.reorder(keep) is None  # a smaller batch: the old buffers cannot serve as a spare
    assert torch.equal(cache.get()[0], k_before)
    k, _ = cache.append(torch.ones(2, 2, 1, 3), torch.ones(2, 2, 1, 3))
    assert k.shape == (2, 2, 6, 3) and torch.equal(k[:, :, :5], k_before)


def test_decoder_cache_rotates_one_spare_through_the_layers():
    cache = DecoderCache(3, cross=False)
    cache.self_attn = [_filled(seed=s) for s in range(3)]
    index = torch.tensor([1, 0, 3, 2])
    expect = [c.get()[0].index_select(0, index) for c in cache.self_attn]
    buffers = {id(c.k) for c in cache.self_attn}
    cache.reorder(index)
    assert [torch.equal(c.get()[0], e) for c, e in zip(cache.self_attn, expect)] == [True] * 3
    assert len({id(c.k) for c in cache.self_attn} - buffers) == 1  # one new buffer for three layers


def test_decoder_cache_keeps_the_spare_so_the_next_reorder_allocates_nothing():
    cache = DecoderCache(3, cross=False)
    cache.self_attn = [_filled(seed=s) for s in range(3)]
    cache.reorder(torch.tensor([1, 0, 3, 2]))
    owned = {id(c.k) for c in cache.self_attn} | {id(cache._spare[0])}
    expect = [c.get()[0].index_select(0, torch.tensor([3, 3, 0, 1])) for c in cache.self_attn]
    cache.reorder(torch.tensor([3, 3, 0, 1]))
    assert {id(c.k) for c in cache.self_attn} <= owned
    assert all(torch.equal(c.get()[0], e) for c, e in zip(cache.self_attn, expect))

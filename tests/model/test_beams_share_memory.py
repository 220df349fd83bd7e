"""Beam search's shared cross-attention: R query rows per memory row equal R copies of the memory (with GQA too)."""

import pytest
import torch

from scratchformer.model.attention import KVCache, MultiHeadAttention


@pytest.mark.parametrize("n_kv_heads", [4, 2, 1])
@pytest.mark.parametrize("fused", [True, False])
def test_beam_rows_equal_repeated_memory(n_kv_heads, fused):
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=16, n_heads=4, d_k=4, d_v=4, n_kv_heads=n_kv_heads, cross=True,
                             fused=fused).eval()
    b_mem, g, l_q, l_k = 3, 4, 2, 5
    x = torch.randn(b_mem * g, l_q, 16)  # (B_mem*G, L_q, D): G consecutive rows per sentence
    memory = torch.randn(b_mem, l_k, 16)  # (B_mem, L_k, D)
    mask = torch.ones(b_mem, 1, 1, l_k, dtype=torch.bool)
    mask[1, ..., 3:] = False  # sentence 1 has 3 real source tokens
    with torch.no_grad():
        ref = mha(x, memory.repeat_interleave(g, 0), mask.repeat_interleave(g, 0))
        got = mha(x, memory, mask)
        cache = KVCache(static=True)
        mha(x, memory, mask, cache)  # fills the cache with B_mem rows of keys/values
        cached = mha(x, None, mask, cache)
    assert cache.k.shape[:2] == (b_mem, n_kv_heads)
    torch.testing.assert_close(got, ref, atol=1e-6, rtol=0)
    torch.testing.assert_close(cached, ref, atol=1e-6, rtol=0)

"""Grouped-query attention: h_kv < h key/value heads equal full attention with each key/value head repeated for its
G = h / h_kv query heads; the KV cache holds h_kv heads, so its memory falls by G."""

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.model.attention import MultiHeadAttention


def _repeated(gqa: MultiHeadAttention) -> MultiHeadAttention:
    """A full multi-head attention (h key/value heads) holding the GQA weights, each key/value head repeated."""
    h, kv, d = gqa.h, gqa.h_kv, gqa.d_k
    full = MultiHeadAttention(d_model=gqa.w_o.out_features, n_heads=h, d_k=d, d_v=d, fused=False).eval()
    w_q, w_k, w_v = gqa.w_qkv.weight.split([h * d, kv * d, kv * d])
    b_q, b_k, b_v = gqa.w_qkv.bias.split([h * d, kv * d, kv * d])

    def rep(t):  # (h_kv * d, ...) -> (h * d, ...): head j becomes heads j*G .. j*G + G-1
        return t.reshape(kv, d, *t.shape[1:]).repeat_interleave(h // kv, dim=0).reshape(h * d, *t.shape[1:])

    with torch.no_grad():
        full.w_qkv.weight.copy_(torch.cat([w_q, rep(w_k), rep(w_v)]))
        full.w_qkv.bias.copy_(torch.cat([b_q, rep(b_k), rep(b_v)]))
        full.w_o.load_state_dict(gqa.w_o.state_dict())
    return full


@pytest.mark.parametrize("n_kv_heads", [1, 2, 4])
@pytest.mark.parametrize("fused", [True, False])
def test_gqa_equals_attention_with_repeated_key_value_heads(n_kv_heads, fused):
    torch.manual_seed(0)
    gqa = MultiHeadAttention(d_model=32, n_heads=4, d_k=8, d_v=8, n_kv_heads=n_kv_heads, fused=fused).eval()
    assert gqa.w_qkv.weight.shape == (32 + 2 * n_kv_heads * 8, 32)
    with torch.no_grad():
        for p in gqa.parameters():
            p.normal_()
    x = torch.randn(2, 5, 32)
    mask = torch.ones(2, 1, 5, 5, dtype=torch.bool).tril()
    mask[1, ..., :2] = False  # row 1 is left-padded by two
    mask[1, :, :2, 0] = True  # (a padded query keeps one key, as decoding does)
    with torch.no_grad():
        torch.testing.assert_close(gqa(x, mask=mask), _repeated(gqa)(x, mask=mask), atol=1e-5, rtol=1e-5)


def test_gqa_refuses_a_head_count_that_does_not_divide():
    with pytest.raises(ValueError, match="must divide"):
        MultiHeadAttention(d_model=32, n_heads=4, d_k=8, d_v=8, n_kv_heads=3)
    with pytest.raises(Exception, match="n_kv_heads=3 must be a positive divisor of n_heads=4"):
        ModelConfig.preset("gpt-tiny", n_kv_heads=3)


def test_gqa_decoder_cached_equals_uncached_and_its_cache_is_g_times_smaller():
    config = dict(tgt_vocab_size=50, d_model=64, n_heads=4, d_ff=96, n_decoder_layers=2, dropout=0.0)
    ids = torch.randint(3, 50, (2, 9), generator=torch.Generator().manual_seed(0))
    sizes = {}
    for kv in (4, 2, 1):
        torch.manual_seed(0)
        model = build_model(ModelConfig.preset("gpt-tiny", n_kv_heads=kv, **config)).eval()
        cache = model.new_cache()
        with torch.no_grad():
            full = model(ids)
            steps = [model(ids[:, :5], cache=cache)] + [model(ids[:, i : i + 1], cache=cache) for i in range(5, 9)]
        torch.testing.assert_close(torch.cat(steps, 1), full, atol=1e-5, rtol=1e-5)
        sizes[kv] = cache.nbytes
        # B * layers * h_kv * L * (d_k + d_v) floats
        assert cache.nbytes == 2 * 2 * kv * 9 * (16 + 16) * 4
    assert sizes[4] == 2 * sizes[2] == 4 * sizes[1]

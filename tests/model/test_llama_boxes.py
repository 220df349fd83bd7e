"""Each Llama box equals transformers' own module (random small config, 1e-6): LlamaRMSNorm, LlamaMLP (SwiGLU),
LlamaRotaryEmbedding (with the llama3 scaling rule), LlamaAttention with grouped-query heads and a padded batch."""

import pytest
import torch

from scratchformer.model.attention import MultiHeadAttention
from scratchformer.model.feedforward import PositionwiseFeedForward
from scratchformer.model.norm import RMSNorm
from scratchformer.model.rope import RotaryEmbedding

llama = pytest.importorskip("transformers.models.llama.modeling_llama")
LlamaConfig = pytest.importorskip("transformers").LlamaConfig

LLAMA3 = {"rope_type": "llama3", "factor": 8.0, "low_freq_factor": 1.0, "high_freq_factor": 4.0,
          "original_max_position_embeddings": 64}


def _config(rope_scaling=None, **kw):
    rope = {"rope_type": "default", "rope_theta": 500.0, **(rope_scaling or {})}
    fields = dict(hidden_size=32, intermediate_size=48, num_attention_heads=4, num_key_value_heads=2, head_dim=8,
                  num_hidden_layers=1, vocab_size=50, rms_norm_eps=1e-5, max_position_embeddings=256,
                  rope_parameters=rope, attention_bias=False, attn_implementation="eager", **kw)
    return LlamaConfig(**fields)


def _randomise(module):
    torch.manual_seed(1)
    with torch.no_grad():
        for p in module.parameters():
            p.normal_(0, 0.3)
    return module


@pytest.mark.parametrize("fused", [True, False])
def test_rmsnorm_equals_llama_rmsnorm(fused):
    theirs = _randomise(llama.LlamaRMSNorm(32, eps=1e-5))
    ours = RMSNorm(32, eps=1e-5, fused=fused)
    ours.load_state_dict(theirs.state_dict())
    x = torch.randn(3, 7, 32) * 3
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=0)


def test_gated_ffn_equals_llama_mlp():
    theirs = _randomise(llama.LlamaMLP(_config()))
    ours = PositionwiseFeedForward(d_model=32, d_ff=48, activation="silu", bias=False, gated=True)
    with torch.no_grad():
        ours.w_1.weight.copy_(torch.cat([theirs.gate_proj.weight, theirs.up_proj.weight]))
        ours.w_2.weight.copy_(theirs.down_proj.weight)
    x = torch.randn(3, 7, 32)  # unseeded, outputs up to ~20, where 1e-6 is half an ulp: hence rtol too
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)


@pytest.mark.parametrize("scaling", [None, LLAMA3, {"rope_type": "linear", "factor": 4.0}])
def test_rope_equals_llama_rotary_embedding(scaling):
    config = _config(scaling)
    theirs = llama.LlamaRotaryEmbedding(config)
    ours = RotaryEmbedding(head_dim=8, theta=500.0, scaling=scaling)
    torch.testing.assert_close(ours.inv_freq, theirs.inv_freq, atol=0, rtol=0)
    q, k = torch.randn(2, 4, 6, 8), torch.randn(2, 2, 6, 8)
    positions = torch.tensor([[0, 1, 2, 3, 4, 5], [0, 0, 0, 1, 2, 3]])  # row 1: left-padded by two
    cos, sin = theirs(q, positions)
    ref_q, ref_k = llama.apply_rotary_pos_emb(q, k, cos, sin)
    got_q, got_k = ours(q, k, positions)
    torch.testing.assert_close(got_q, ref_q, atol=1e-6, rtol=0)
    torch.testing.assert_close(got_k, ref_k, atol=1e-6, rtol=0)
    # the cache offset: positions 4, 5 of row 0 from offset=4 without explicit positions
    tail_q, tail_k = ours(q[:1, :, 4:], k[:1, :, 4:], None, offset=4)
    torch.testing.assert_close(tail_q, ref_q[:1, :, 4:], atol=1e-6, rtol=0)
    torch.testing.assert_close(tail_k, ref_k[:1, :, 4:], atol=1e-6, rtol=0)


@pytest.mark.parametrize("fused", [True, False])
def test_gqa_rope_attention_equals_llama_attention_with_padding(fused):
    config = _config(LLAMA3)
    theirs = _randomise(llama.LlamaAttention(config, layer_idx=0)).eval()
    rope = RotaryEmbedding(head_dim=8, theta=500.0, scaling=LLAMA3)
    ours = MultiHeadAttention(d_model=32, n_heads=4, d_k=8, d_v=8, n_kv_heads=2, bias=False, fused=fused,
                              rope=rope).eval()
    with torch.no_grad():
        ours.w_qkv.weight.copy_(torch.cat([theirs.q_proj.weight, theirs.k_proj.weight, theirs.v_proj.weight]))
        ours.w_o.weight.copy_(theirs.o_proj.weight)
    b, l = 2, 6
    x = torch.randn(b, l, 32)
    real = torch.tensor([[1] * 6, [0, 0, 1, 1, 1, 1]]).bool()  # row 1 left-padded by two
    positions = (real.long().cumsum(-1) - 1).clamp(min=0)  # (B, L): each row counts from its first real token
    mask = torch.ones(l, l).tril().bool()[None, None] & real[:, None, None, :]  # (B, 1, L, L)
    mask[1, :, :2, 2] = True  # padded queries see one real key (their output is ignored), no all-masked row
    additive = torch.zeros(b, 1, l, l).masked_fill(~mask, torch.finfo(torch.float32).min)
    cos, sin = llama.LlamaRotaryEmbedding(config)(x, positions)
    with torch.no_grad():
        ref, _ = theirs(x, position_embeddings=(cos, sin), attention_mask=additive)
        got = ours(x, mask=mask, positions=positions)
    # fp32 through other kernels (SDPA or ours against HF's eager matmuls): outputs of size ~5 differ by a few ulps
    # (1.4e-6 on an AMX Xeon), so the bound is relative as well, the project's 1e-5; a wrong mask or rotation is ~0.1
    torch.testing.assert_close(got[:, 2:], ref[:, 2:], atol=1e-5, rtol=1e-5)  # every real query
    torch.testing.assert_close(got[0], ref[0], atol=1e-5, rtol=1e-5)

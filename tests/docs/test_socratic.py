"""docs/zh/faq.md's Socratic questions 2, 4 and 6 (seed 003), each with a small measurement; the FAQ names these
tests and quotes their numbers (`measure_*` gives them: python -c "from tests.docs.test_socratic import *; ...").

    2  alternatives to scaling: how peaked softmax gets as d_k grows, unscaled, scaled, additive, QK-norm
    4  decoder-only "understanding": which positions of a prompt a later token can still change
    6  LayerNorm as a sphere: before its affine, every output has mean 0 and length sqrt(D)
"""

from __future__ import annotations

import math

import torch

from scratchformer import ModelConfig, build_model
from scratchformer.model.norm import LayerNorm, RMSNorm, Seed000LayerNorm

DIMS = (16, 64, 256, 1024)


# -- 2. alternatives to scaling ------------------------------------------------------------------------------------

def measure_peakedness(n_keys: int = 32, trials: int = 200, d_attn: int = 64) -> dict[str, list[float]]:
    """Mean largest softmax weight over `n_keys` random keys (q, k ~ N(0, 1)), per d_k in DIMS, for four scores:
    q.k (unscaled), q.k / sqrt(d_k) (the paper), additive v.tanh(W1 q + W2 k) (Bahdanau; W ~ N(0, 1/d_k),
    v ~ N(0, 1/d_attn)), and QK-norm tau cos(q, k) with a fixed temperature tau = 4."""
    g = torch.Generator().manual_seed(0)
    out: dict[str, list[float]] = {"unscaled": [], "scaled": [], "additive": [], "qk-norm": []}
    for d in DIMS:
        q = torch.randn(trials, 1, d, generator=g)
        k = torch.randn(trials, n_keys, d, generator=g)
        w1, w2 = (torch.randn(d, d_attn, generator=g) / math.sqrt(d) for _ in range(2))
        v = torch.randn(d_attn, generator=g) / math.sqrt(d_attn)
        dot = (q @ k.transpose(1, 2)).squeeze(1)  # (trials, n_keys)
        scores = {"unscaled": dot, "scaled": dot / math.sqrt(d),
                  "additive": torch.tanh(q @ w1 + k @ w2) @ v,  # (trials, n_keys)
                  "qk-norm": 4.0 * torch.nn.functional.cosine_similarity(q, k, dim=-1)}
        for name, s in scores.items():
            out[name].append(float(s.softmax(-1).max(-1).values.mean()))
    return out


def test_socratic_2_additive_attention_and_qk_norm_keep_softmax_soft_as_d_k_grows():
    peak = measure_peakedness()
    assert peak["unscaled"][-1] > 0.9 and peak["unscaled"][-1] > peak["unscaled"][0] + 0.3  # tends to one-hot
    for name in ("scaled", "additive"):  # the score's scale does not depend on d_k: measured 0.16-0.17, 0.08-0.10
        assert max(peak[name]) < 0.5 and max(peak[name]) - min(peak[name]) < 0.1, (name, peak[name])
    # QK-norm: |score| <= tau whatever d_k, so it can never saturate; but random directions grow orthogonal, so at a
    # fixed tau it flattens instead (0.15 -> 0.04): why QK-norm models learn their temperature
    bound = math.exp(4.0) / (math.exp(4.0) + 31 * math.exp(-4.0))
    assert all(p < bound for p in peak["qk-norm"]) and peak["qk-norm"][-1] < peak["qk-norm"][0] - 0.05


# -- 4. decoder-only "understanding" -------------------------------------------------------------------------------

def measure_reach(arch: str, changed: int = 5, length: int = 10) -> list[float]:
    """Change the token at position `changed` of a random prompt: the largest change of the last layer's hidden state
    at each position, in an untrained gpt-tiny (arch decoder) or bert-tiny (encoder)."""
    torch.manual_seed(0)
    preset = {"decoder": "gpt-tiny", "encoder": "bert-tiny"}[arch]
    model = build_model(ModelConfig.preset(preset, dropout=0.0)).eval()
    ids = torch.randint(5, 900, (1, length))
    other = ids.clone()
    other[0, changed] = 901
    with torch.no_grad():
        run = model.hidden if arch == "decoder" else model
        a, b = run(ids), run(other)  # (1, L, D)
    return (a - b).abs().amax(-1)[0].tolist()


def test_socratic_4_a_decoder_only_model_reads_each_prompt_token_only_with_what_came_before():
    decoder, encoder = measure_reach("decoder"), measure_reach("encoder")
    assert max(decoder[:5]) < 1e-5 < 1e-2 < min(decoder[5:])  # positions before the change cannot see it
    assert min(encoder) > 1e-3  # bidirectional: every position sees every other (measured >= 0.03, untrained)


# -- 6. LayerNorm as a sphere --------------------------------------------------------------------------------------

def test_socratic_6_layernorm_puts_each_vector_on_a_sphere_before_its_affine():
    torch.manual_seed(0)
    d = 512
    x = torch.randn(1000, d) * 3 + 2
    for norm, radius, centred in ((LayerNorm(d, fused=False), math.sqrt(d), True),
                                  (Seed000LayerNorm(d), math.sqrt(d - 1), True),  # unbiased std: sqrt(D-1)
                                  (RMSNorm(d, fused=False), math.sqrt(d), False)):  # no centring: not a hyperplane
        with torch.no_grad():
            y = norm(x)  # weight 1, bias 0: the norm alone
        assert torch.allclose(y.norm(dim=-1), torch.full((1000,), radius), rtol=1e-4), type(norm).__name__
        assert (y.sum(-1).abs().max() < 1e-3) == centred
    ln = LayerNorm(d, fused=False)
    with torch.no_grad():  # what it forgets: a shift along (1, ..., 1) and the length; only the direction is left
        assert torch.allclose(ln(3 * x + 5), ln(x), atol=1e-4)
        ln.weight.normal_()  # the affine moves it off the sphere again
        assert ln(x).norm(dim=-1).std() > 0.1

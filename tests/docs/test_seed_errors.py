"""Three of the seeds' own errors, shown on our code, as docs/proofs.md and docs/pictures.md (and their Chinese
twins) state them: seed 003's hand-written softmax normalises the whole tensor, seed 000 has the speed of the
positional-encoding dimensions backwards, and seed 001's "LayerNorm(x + Sublayer(x)), not Post-Norm" is post-norm."""

from __future__ import annotations

import math

import torch
from torch import nn

from scratchformer.model.attention import scaled_dot_product_attention
from scratchformer.model.embedding import sinusoid_table
from scratchformer.model.norm import SublayerConnection


def seed_003_softmax(X: torch.Tensor) -> torch.Tensor:
    """Seed 003's code, as written: the max and the sum are taken over every element of X."""
    m = torch.max(X)
    X_exp = torch.exp(X - m)
    L = torch.sum(X_exp)
    return X_exp / L


def test_seed_003s_softmax_is_right_for_one_row_and_wrong_for_a_batch_of_rows():
    row = torch.tensor([1.0, 2.0, 3.0])
    assert torch.allclose(seed_003_softmax(row), row.softmax(-1))  # one row: the same
    scores = torch.tensor([[1.0, 2.0, 3.0], [1.0, 1.0, 1.0]])  # (L_q=2, L_k=3)
    whole = seed_003_softmax(scores)
    assert torch.allclose(whole.sum(), torch.tensor(1.0))  # the whole matrix sums to 1 ...
    assert whole.sum(-1)[1] < 0.3  # ... so no row does: the uniform row gets 0.21 in all, not 1
    q = torch.randn(2, 1, 4, 8)  # (B, h, L_q, d_k)
    _, weights = scaled_dot_product_attention(q, torch.randn(2, 1, 5, 8), torch.randn(2, 1, 5, 8))
    assert torch.allclose(weights.sum(-1), torch.ones(2, 1, 4))  # ours: every query's row sums to 1


def test_low_positional_dimensions_change_fast_and_high_ones_slowly():
    """Seed 000: 低维度变化慢，高维度变化快. The wavelength of dimensions 2i and 2i+1 is 2*pi*10000^(2i/D)."""
    D = 128
    table = sinusoid_table(1000, D)  # (positions, D)
    flips = [int(((table[1:, d] > 0) != (table[:-1, d] > 0)).sum()) for d in (0, 16, 32, 64, 126)]
    assert flips == sorted(flips, reverse=True) and flips[0] > 100 * max(flips[-1], 1)
    assert math.isclose(2 * math.pi * 10000 ** (0 / D), 6.28, abs_tol=0.01)
    assert math.isclose(2 * math.pi * 10000 ** (64 / D), 628.3, abs_tol=0.1)


def test_layernorm_of_x_plus_sublayer_is_what_post_norm_computes():
    """Seed 001 writes LayerNorm(x + Sublayer(x)) and calls it 'not Post-Norm'; it is exactly the post placement."""
    torch.manual_seed(0)
    norm, sublayer, x = nn.LayerNorm(16), nn.Linear(16, 16), torch.randn(2, 5, 16)
    post = SublayerConnection(norm=norm, dropout=0.0, placement="post")
    pre = SublayerConnection(norm=norm, dropout=0.0, placement="pre")
    assert torch.allclose(post(x, sublayer), norm(x + sublayer(x)))
    assert not torch.allclose(pre(x, sublayer), norm(x + sublayer(x)))

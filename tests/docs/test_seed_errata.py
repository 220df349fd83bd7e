"""docs/seed-errata.md (and docs/zh/seed-errata.md), item by item: each of the seeds' errors shown on a case where
it matters. The pages name these tests; the last test checks that every test they name exists here, and that
both pages list the same items.

The seeds' code is copied as they wrote it (seed_000_layernorm, seed_003_softmax, seed_000_sublayer, ...)."""

from __future__ import annotations

import math
import re
from pathlib import Path

import torch
import torch.nn.functional as F
from torch import nn

from scratchformer.model.embedding import sinusoid_table
from scratchformer.model.norm import SublayerConnection

ROOT = Path(__file__).resolve().parents[2]


# -- 1. seed 000: "低维度变化慢，高维度变化快" ---------------------------------------------------------------------

def test_1_low_pe_dimensions_change_fast():
    """Wavelength of dimensions 2i, 2i+1: 2 pi 10000^(2i/D), growing with i. Step-to-step change per dimension."""
    D = 64
    table = sinusoid_table(200, D)  # (positions, D)
    change = (table[1:] - table[:-1]).abs().mean(0)  # (D,): mean |PE(pos+1) - PE(pos)| per dimension
    assert change[0] > 0.5 and change[-2] < 0.01  # dimension 0 swings, dimension 62 barely moves
    pairs = change[0::2]  # the sine dimensions, low to high
    assert all(a >= b for a, b in zip(pairs[:-1].tolist(), pairs[1:].tolist()))  # monotone: fast -> slow


# -- 2. seed 003: the hand-written softmax --------------------------------------------------------------------

def seed_003_softmax(X: torch.Tensor) -> torch.Tensor:
    """Seed 003, as written: the max and the sum over every element of X, not per row."""
    m = torch.max(X)
    X_exp = torch.exp(X - m)
    L = torch.sum(X_exp)
    P = X_exp / L
    return P


def test_2_seed_003_softmax_against_the_per_row_one_on_a_batch():
    scores = torch.tensor([[[2.0, 1.0, 0.1], [0.5, 0.5, 0.5]],
                           [[9.0, 0.0, 0.0], [0.0, 0.0, 0.0]]])  # (B=2, L_q=2, L_k=3)
    whole, per_row = seed_003_softmax(scores), torch.softmax(scores, dim=-1)
    assert torch.allclose(per_row.sum(-1), torch.ones(2, 2))  # every query's weights sum to 1
    assert math.isclose(float(whole.sum()), 1.0, rel_tol=1e-6)  # seed 003: the whole batch sums to 1
    assert float(whole[0].sum()) < 0.01  # sentence 1's queries get 0.2% in all: sentence 2's 9.0 takes the rest
    assert not torch.allclose(whole, per_row, atol=0.1)
    row = scores[0, 0]
    assert torch.allclose(seed_003_softmax(row), torch.softmax(row, -1))  # one row: the two agree
    fixed = torch.exp(scores - scores.amax(-1, keepdim=True))
    assert torch.allclose(fixed / fixed.sum(-1, keepdim=True), per_row)  # the fix: dim=-1, keepdim=True


# -- 3. seed 001: "LayerNorm(x + Sublayer(x))，而不是Post-Norm" ----------------------------------------------------

def test_3_layernorm_of_x_plus_sublayer_is_post_norm():
    torch.manual_seed(0)
    norm, sublayer, x = nn.LayerNorm(16), nn.Linear(16, 16), torch.randn(2, 5, 16)
    post = SublayerConnection(norm=norm, dropout=0.0, placement="post")
    assert torch.allclose(post(x, sublayer), norm(x + sublayer(x)))  # post-norm is exactly that formula


# -- 4. seed 000: the comment says LayerNorm(x + Dropout(Sublayer(x))), the code computes something else ----------

def seed_000_sublayer(x, sublayer, norm, dropout):
    """Seed 000's SublayerConnection.forward, as written (its comment: "公式：LayerNorm(x + Dropout(Sublayer(x)))")."""
    return dropout(norm(sublayer(x))) + x


def test_4_seed_000s_sublayer_connection_is_neither_post_nor_pre_norm():
    torch.manual_seed(0)
    norm, sublayer, x, drop = nn.LayerNorm(16), nn.Linear(16, 16), torch.randn(2, 5, 16), nn.Identity()
    seed = seed_000_sublayer(x, sublayer, norm, drop)
    assert not torch.allclose(seed, norm(x + sublayer(x)), atol=1e-3)  # not its comment's (post) formula
    assert not torch.allclose(seed, x + sublayer(norm(x)), atol=1e-3)  # not the pre-norm its text says
    ours = SublayerConnection(norm=norm, dropout=0.0, placement="seed000")
    assert torch.allclose(ours(x, sublayer), seed)  # our placement "seed000" is it, for the lab to train


# -- 5. seed 003: "Post-Norm（原始论文）" in the text, x + LayerNorm(F(x)) in the code -----------------------------

def test_5_seed_003s_encoder_layer_is_not_the_post_norm_it_describes():
    torch.manual_seed(0)
    norm, sublayer, x = nn.LayerNorm(16), nn.Linear(16, 16), torch.randn(2, 5, 16)
    seed = x + norm(sublayer(x))  # seed 003's EncoderLayer: x = x + self.norm1(attn_out)
    assert not torch.allclose(seed, norm(x + sublayer(x)), atol=1e-3)
    ours = SublayerConnection(norm=norm, dropout=0.0, placement="seed003")
    assert torch.allclose(ours(x, sublayer), seed)
    assert float(seed.detach().std(-1).mean()) > 1.2  # its output is not normalised: the residual stream keeps growing


# -- 6. seed 000: "LayerNorm ...（批量归一化）" --------------------------------------------------------------------

def test_6_layernorm_is_not_batch_normalization():
    torch.manual_seed(0)
    x = torch.randn(4, 6, 8)  # (B, L, D)
    other = x.clone()
    other[1:] *= 100  # change every sentence but the first
    ln, bn = nn.LayerNorm(8), nn.BatchNorm1d(8)
    assert torch.allclose(ln(x)[0], ln(other)[0], atol=1e-5)  # LayerNorm: one token's own features only
    flat = lambda t: bn(t.reshape(-1, 8)).reshape(t.shape)  # noqa: E731 BatchNorm over every token of the batch
    assert not torch.allclose(flat(x)[0], flat(other)[0], atol=1e-2)  # BatchNorm: the batch changes sentence 0


# -- 7. seed 000: "softmax配合CrossEntropyLoss应该效果差不多" -------------------------------------------------------

def test_7_cross_entropy_is_log_softmax_plus_nll_and_not_softmax_plus_cross_entropy():
    torch.manual_seed(0)
    logits = (3 * torch.randn(32, 100)).requires_grad_(True)  # (tokens, V)
    target = torch.randint(0, 100, (32,))
    ce = F.cross_entropy(logits, target)
    nll = F.nll_loss(F.log_softmax(logits, dim=-1), target)
    assert torch.allclose(ce, nll, rtol=1e-6)  # seed 000's Generator + NLLLoss == CrossEntropyLoss on logits
    doubled = F.cross_entropy(torch.softmax(logits, dim=-1), target)  # softmax fed to CrossEntropyLoss
    assert abs(doubled.item() - math.log(100)) < 0.05 < abs(ce.item() - math.log(100))  # stuck near ln V
    g_ce = torch.autograd.grad(ce, logits)[0]
    g_doubled = torch.autograd.grad(doubled, logits)[0]
    assert float(g_doubled.norm()) < 0.2 * float(g_ce.norm())  # and its gradient is much weaker


# -- 8. seed 000's own LayerNorm: unbiased std, eps added to the std (a difference, not an error) -------------------

def seed_000_layernorm(x, a, b, eps=1e-6):
    mean = x.mean(-1, keepdim=True)
    std = x.std(-1, keepdim=True)  # unbiased: divides by D - 1
    return a * (x - mean) / (std + eps) + b


def test_8_seed_000s_layernorm_differs_from_torchs_by_sqrt_of_d_minus_1_over_d():
    torch.manual_seed(0)
    D = 8
    x = torch.randn(3, D)
    seed = seed_000_layernorm(x, torch.ones(D), torch.zeros(D))
    torch_ln = F.layer_norm(x, (D,), eps=1e-6)
    assert torch.allclose(seed, torch_ln * math.sqrt((D - 1) / D), atol=1e-4)  # 6.5% smaller at D=8
    wide = torch.randn(3, 512)
    gap = (seed_000_layernorm(wide, torch.ones(512), torch.zeros(512)) - F.layer_norm(wide, (512,), eps=1e-6)).abs()
    assert 1e-4 < float(gap.max()) < 0.01  # at D=512 the factor is 0.999: the learned gain absorbs it


# -- 9. the quote our add-and-norm page put in seed 001's mouth --------------------------------------------------

def test_9_the_invented_quote_is_gone():
    pages = [p for p in (ROOT / "docs").rglob("*.md") if "seed-errata" not in p.name]
    for page in [*pages, ROOT / "README.md", ROOT / "README.zh-CN.md"]:
        text = page.read_text(encoding="utf-8")
        assert "very easy to get wrong" not in text and "非常容易出错" not in text, page


# -- the pages name these tests, and both list the same items -----------------------------------------------------

def test_the_errata_pages_name_tests_that_exist():
    here = set(re.findall(r"^def (test_\w+)", Path(__file__).read_text(encoding="utf-8"), re.M))
    named = {}
    for page in ("docs/seed-errata.md", "docs/zh/seed-errata.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        named[page] = re.findall(r"test_seed_errata\.py::(test_\w+)", text)
        assert named[page] and set(named[page]) <= here, page
    assert named["docs/seed-errata.md"] == named["docs/zh/seed-errata.md"]
    assert {n for n in here if re.match(r"test_\d", n)} <= set(named["docs/seed-errata.md"])

"""docs/seed-errata.md (and docs/zh/seed-errata.md), item by item: each of the seeds' errors shown on a case where
it matters. The pages name these tests; the last test checks that every test they name exists here, and that
both pages list the same items.

The seeds' code is copied as they wrote it (seed_000_layernorm, seed_003_softmax, seed_000_sublayer, ...)."""

from __future__ import annotations

import ast
import copy
import json
import math
import re
from pathlib import Path

import numpy as np
import pytest
import torch
import torch.nn.functional as F
from torch import nn

from scratchformer.model.attention import scaled_dot_product_attention
from scratchformer.model.embedding import TokenEmbedding, sinusoid_table
from scratchformer.model.masks import causal_mask, combine, padding_mask
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


# -- 10. seed 000: dm02_test_triu's k=0 masks the diagonal -----------------------------------------------------

def seed_000_triu(size):
    """Seed 000's dm02_test_triu, as written: 1 - triu(k=0), 1 = may attend (its attention fills mask == 0)."""
    temp = np.triu(m=np.ones((1, size, size)), k=0).astype("uint8")
    return torch.from_numpy(1 - temp)


def seed_000_attention(query, key, value, mask=None):
    """Seed 000's attention(), as written (without dropout)."""
    scores = torch.matmul(query, key.transpose(-2, -1)) / math.sqrt(query.size()[-1])
    if mask is not None:
        scores = scores.masked_fill(mask == 0, -1e9)
    p_attn = F.softmax(scores, dim=-1)
    return torch.matmul(p_attn, value), p_attn


def test_10_seed_000s_triu_with_k_0_hides_the_diagonal_and_row_0_sees_the_future():
    seed = seed_000_triu(4)[0]
    assert seed.diagonal().sum() == 0  # every query is hidden from itself
    assert seed[0].sum() == 0  # row 0 hides everything ...
    torch.manual_seed(0)
    q = k = v = torch.randn(1, 4, 8)
    _, p = seed_000_attention(q, k, v, seed.unsqueeze(0))
    assert torch.allclose(p[0, 0], torch.full((4,), 0.25))  # all -1e9: position 0 attends evenly, future too
    fixed = torch.from_numpy(1 - np.triu(np.ones((4, 4)), k=1).astype("uint8"))  # the fix: k=1
    assert torch.equal(fixed.bool(), causal_mask(4)[0, 0])  # lower triangle with the diagonal: ours
    _, p = seed_000_attention(q, k, v, fixed.unsqueeze(0))
    assert float(p[0, 0, 0]) == 1.0 and float(p[0].triu(1).abs().max()) < 1e-6  # no weight on the future


# -- 11. seed 000: mask.unsqueeze(0) "增加头维度" adds the axis in front of the batch ------------------------------

def seed_000_heads(x, h, mask, where):
    """Seed 000's MultiHeadAttention.forward with identity projections; where=0 is its mask.unsqueeze(0)."""
    mask = mask.unsqueeze(where)
    batch = x.size(0)
    q = k = v = x.view(batch, -1, h, x.size(-1) // h).transpose(1, 2)  # (B, h, L, d_k)
    return seed_000_attention(q, k, v, mask)[1]  # (B, h, L, L)


def test_11_seed_000s_unsqueeze_0_puts_the_padding_mask_on_the_wrong_axis():
    torch.manual_seed(0)
    L, h = 5, 8
    lengths = torch.tensor([5, 3, 5, 4, 2, 5, 5, 1])  # real tokens per sentence, B = 8 = h
    pad = (torch.arange(L)[None, :] < lengths[:, None]).unsqueeze(-2).long()  # (B, 1, L), 1 = real token
    x = torch.randn(8, L, 16)
    seed = seed_000_heads(x, h, pad, 0)  # (1, B, 1, L) broadcast against (B, h, L, L): head j gets sentence j's mask
    fixed = seed_000_heads(x, h, pad, 1)  # (B, 1, 1, L): every head of sentence b gets sentence b's mask
    for b in range(8):
        for j in range(h):
            assert float(seed[b, j, :, int(lengths[j]):].sum()) == 0.0  # hidden: sentence j's padding
            assert float(fixed[b, j, :, int(lengths[b]):].sum()) == 0.0
    assert float(seed[1, 0, :, 3:].sum()) > 0.5  # sentence 1 (3 tokens) attends to its own padding in head 0
    with pytest.raises(RuntimeError):  # B = 2, h = 8: the batch axis meets the head axis
        seed_000_heads(x[:2], h, pad[:2], 0)
    assert seed_000_heads(x[:2], h, pad[:2], 1).shape == (2, 8, L, L)
    mask = padding_mask(torch.where(pad[:, 0].bool(), 1, 0), pad_id=0)  # ours: (B, 1, 1, L) by construction
    q = x.view(8, L, h, 2).transpose(1, 2)
    assert torch.allclose(scaled_dot_product_attention(q, q, q, mask)[1], fixed, atol=1e-6)


# -- 12. seed 000: "Embedding 的权重是较小值（如均值为 0、方差为 1）" as the reason for x sqrt(d_model) --------------

def test_12_unit_variance_embeddings_times_sqrt_d_drown_the_positional_encoding():
    torch.manual_seed(0)
    D = 512
    rms = lambda t: float(t.detach().pow(2).mean().sqrt())  # noqa: E731
    pe = rms(sinusoid_table(1000, D))
    assert abs(pe - 0.707) < 0.005  # sin and cos in [-1, 1]: RMS sqrt(1/2)
    seed = nn.Embedding(1000, D).weight  # nn.Embedding's default N(0, 1): not small, larger than the PE already
    assert abs(rms(seed) - 1.0) < 0.01
    assert abs(rms(seed) * math.sqrt(D) - 22.6) < 0.3  # x sqrt(512): 32 times the PE, the PE is drowned
    ours = TokenEmbedding(1000, D)  # std D^-0.5: after x sqrt(D), RMS 1, next to the PE's 0.707
    assert abs(rms(ours(torch.arange(1000))) - 1.0) < 0.01


# -- 13. seed 001: "(batch,1,1,seq_len)可以广播到(batch,1,seq_len,seq_len)吗？不能" ------------------------------

def seed_001_masks(tgt):
    """Seed 001's create_padding_mask and create_look_ahead_mask, in numpy (1 = masked), and its tf.maximum."""
    padding = (tgt == 0).astype(np.float32)[:, None, None, :]  # (batch, 1, 1, seq_len)
    L = tgt.shape[1]
    look_ahead = (1 - np.tril(np.ones((L, L), np.float32)))[None, None]  # 1 - band_part(ones, -1, 0): (1, 1, L, L)
    return padding, look_ahead, np.maximum(look_ahead, padding)


def test_13_batch_1_1_l_does_broadcast_to_batch_1_l_l():
    tgt = np.array([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    padding, look_ahead, combined = seed_001_masks(tgt)
    assert np.broadcast_shapes(padding.shape, (2, 1, 5, 5)) == (2, 1, 5, 5)  # it does broadcast
    assert combined.shape == (2, 1, 5, 5)  # the seed's own tf.maximum gives the right shape ...
    ours = combine(padding_mask(torch.from_numpy(tgt), 0), causal_mask(5))  # bool, True = may attend
    assert np.array_equal(combined == 0, ours.numpy())  # ... and the right mask: future and padding keys hidden
    assert combined[1, 0, 4].tolist() == [0, 0, 0, 1, 1]  # sentence 2's last query: its 3 real keys, not the pads
    tf = _tensorflow()
    if tf is not None:
        seed = tf.maximum(1 - tf.linalg.band_part(tf.ones((5, 5)), -1, 0)[tf.newaxis, tf.newaxis],
                          tf.cast(tf.math.equal(tgt, 0), tf.float32)[:, tf.newaxis, tf.newaxis, :])
        assert tuple(seed.shape) == (2, 1, 5, 5) and np.array_equal(seed.numpy(), combined)


def _tensorflow():
    """TensorFlow if it is installed (the keras extra), else None: its checks here are skipped without it."""
    try:
        import tensorflow as tf  # noqa: PLC0415
    except ImportError:
        return None
    return tf


# -- 14. seed 001: "忘了除以根号，结果训练到第几个epoch损失就NaN了" ------------------------------------------------

def test_14_without_the_scale_attention_saturates_but_does_not_give_nan():
    torch.manual_seed(0)
    q, k = torch.randn(256, 1024), torch.randn(32, 1024)  # d_k = 1024, unit-variance entries, no division
    q.requires_grad_(True)
    weights = (q @ k.T).softmax(-1)  # scores of std ~32: softmax saturates ...
    assert float(weights.detach().max(-1).values.mean()) > 0.9
    (weights * torch.randn(32)).sum().backward()
    assert torch.isfinite(weights).all() and torch.isfinite(q.grad).all()  # ... but finite: softmax subtracts the max
    lab = json.loads((ROOT / "docs" / "lab" / "scaling.json").read_text(encoding="utf-8"))["numbers"]["training"]
    assert lab["d_k"] == 256 and lab["accuracy"]["unscaled"] > 0.95  # our lab: the unscaled tagger trains, 98.2%
    assert math.isfinite(lab["final_loss"]["unscaled"])  # no NaN


# -- 15. seed 001: code that does not run as printed -------------------------------------------------------------

SEED_001_DEFINED = {"PositionalEncoding", "MultiHeadAttention", "FeedForward", "EncoderLayer", "Encoder",
                    "DecoderLayer", "Transformer", "WarmupSchedule"}  # every class seed 001 defines
SEED_001_TRANSFORMER_INIT = """
self.encoder = Encoder(en_vocab_size, d_model, num_heads, dff, num_layers)
self.decoder = Decoder(zh_vocab_size, d_model, num_heads, dff, num_layers)
self.final_layer = tf.keras.layers.Dense(zh_vocab_size)
"""  # seed 001's Transformer.__init__, as written


def test_15_seed_001s_code_does_not_run_as_printed():
    called = {n.func.id for n in ast.walk(ast.parse(SEED_001_TRANSFORMER_INIT))
              if isinstance(n, ast.Call) and isinstance(n.func, ast.Name)}
    assert called - SEED_001_DEFINED == {"Decoder"}  # Decoder is used and never defined
    tgt = np.array([[1, 5, 6, 2, 0], [1, 7, 2, 0, 0]])
    with pytest.raises(TypeError):  # create_look_ahead_mask(tgt) in Transformer.call: a (2, 5) tensor as seq_len
        np.ones((tgt, tgt))
    assert np.ones((tgt.shape[1],) * 2).shape == (5, 5)  # the fix: create_look_ahead_mask(tf.shape(tgt)[1])
    decoder_input, next_token = np.array([[1]]), np.array([5])  # greedy_decode: (1, t) and argmax's (1,)
    with pytest.raises(ValueError):  # tf.concat([decoder_input, next_token], axis=-1): ranks 2 and 1
        np.concatenate([decoder_input, next_token], axis=-1)
    assert np.concatenate([decoder_input, next_token[:, None]], axis=-1).tolist() == [[1, 5]]  # the fix
    tf = _tensorflow()
    if tf is None:
        pytest.skip("the TensorFlow checks (tf.softmax, tf.ones, tf.concat) need the keras extra; numpy's passed")
    assert not hasattr(tf, "softmax") and hasattr(tf.nn, "softmax")  # weights = tf.softmax(...): AttributeError
    with pytest.raises((ValueError, TypeError, tf.errors.InvalidArgumentError)):
        tf.ones((tf.constant(tgt), tf.constant(tgt)))
    with pytest.raises((ValueError, tf.errors.InvalidArgumentError)):
        tf.concat([tf.constant([[1]], tf.int64), tf.argmax(tf.zeros((1, 7)), axis=-1)], axis=-1)


# -- 16. seed 003: "BatchNorm 的 γ, β 的形状 ... 相当于 [bs, seq_len]" --------------------------------------------

def test_16_batchnorms_gamma_and_beta_are_per_feature():
    bn, ln = nn.BatchNorm1d(512), nn.LayerNorm(512)
    assert bn.weight.shape == bn.bias.shape == (512,)  # one gamma and one beta per feature, like LayerNorm's
    assert ln.weight.shape == ln.bias.shape == (512,)
    for bs, seq_len in ((2, 7), (3, 11)):  # any batch size and length: the same 512 gammas and betas
        assert bn(torch.randn(bs * seq_len, 512)).shape == (bs * seq_len, 512)
    assert sum(p.numel() for p in bn.parameters()) == 2 * 512  # nothing of shape [bs, seq_len]


# -- 17. seed 000: make_model passes dropout_p= to EncoderLayer(dropout=), and Encoder reads layer.d_model ----------

class Seed000SublayerConnection(nn.Module):
    def __init__(self, d_model, dropout=0.1):
        super().__init__()
        self.norm = nn.LayerNorm(d_model)
        self.dropout = nn.Dropout(dropout)


class Seed000EncoderLayer(nn.Module):
    """Seed 000's EncoderLayer.__init__, as written: it never stores d_model."""

    def __init__(self, d_model, self_attn, feed_forward, dropout=0.1):
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = nn.ModuleList([Seed000SublayerConnection(d_model, dropout) for _ in range(2)])


class Seed000Encoder(nn.Module):
    def __init__(self, layer, N):
        super().__init__()
        self.layers = nn.ModuleList([copy.deepcopy(layer) for _ in range(N)])
        self.norm = nn.LayerNorm(layer.d_model)


def test_17_seed_000s_make_model_stops_at_its_first_two_lines():
    self_attn, ff = nn.Identity(), nn.Identity()
    with pytest.raises(TypeError, match="dropout_p"):  # make_model: EncoderLayer(512, self_attn, ff, dropout_p=0.2)
        Seed000EncoderLayer(512, self_attn, ff, dropout_p=0.2)
    layer = Seed000EncoderLayer(512, self_attn, ff, dropout=0.2)
    with pytest.raises(AttributeError, match="d_model"):  # Encoder(encoder_layer, 6): LayerNorm(layer.d_model)
        Seed000Encoder(layer, 6)
    layer.d_model = 512  # the fix: EncoderLayer keeps self.d_model = d_model (the Annotated Transformer's self.size)
    assert len(Seed000Encoder(layer, 6).layers) == 6


# -- 18. our own slips ---------------------------------------------------------------------------------------------

def test_18_our_slips_are_corrected():
    last = 2 * math.pi * 10000 ** (510 / 512)  # the last pair at D = 512 is i = 255: 2i/D = 510/512
    assert round(last) == 60611 and round(2 * math.pi * 10000) == 62832  # 62,832 is the limit no pair reaches
    table = sinusoid_table(2, 512)
    assert math.isclose(2 * math.pi / float(torch.asin(table[1, 510])), last, rel_tol=1e-4)  # column 510's period
    for page in ("docs/seed-errata.md", "docs/zh/seed-errata.md"):
        text = (ROOT / page).read_text(encoding="utf-8")
        assert "60,611" in text and "62,832 for" not in text and "最后一对是 62,832" not in text, page
    faq = (ROOT / "docs/zh/faq.md").read_text(encoding="utf-8")
    q10 = faq.split("## Q10", 1)[1].split("\n## ", 1)[0]
    assert "96.3%" in q10 and "84.7%" in q10 and "接近" not in q10  # 96.3% against 84.7% is not "close"
    training = (ROOT / "docs/zh/training.md").read_text(encoding="utf-8")
    assert "后一种这里没有测过" not in training and "两种做法这里都没有测过" in training  # "neither is measured here"

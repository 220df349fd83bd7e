"""Each box on its own: attention (by hand == fused), LayerNorm (by hand == torch), embeddings, FFN, shapes."""

import math

import pytest
import torch
from torch import nn

from scratchformer import ModelConfig, build_model
from scratchformer.model.attention import (
    MultiHeadAttention,
    ScaledDotProductAttention,
    scaled_dot_product_attention,
)
from scratchformer.model.embedding import InputLayer, sinusoid_table
from scratchformer.model.feedforward import PositionwiseFeedForward
from scratchformer.model.masks import causal_mask, combine, padding_mask
from scratchformer.model.norm import LayerNorm, RMSNorm, Seed000LayerNorm, SublayerConnection, make_norm


@pytest.mark.parametrize("l_q,l_k", [(1, 1), (5, 5), (3, 7), (7, 3)])
def test_reference_attention_equals_fused(l_q, l_k):
    torch.manual_seed(0)
    q, k, v = torch.randn(2, 4, l_q, 16), torch.randn(2, 4, l_k, 16), torch.randn(2, 4, l_k, 8)
    mask = torch.rand(2, 1, l_q, l_k) > 0.3
    ref = ScaledDotProductAttention(fused=False)(q, k, v, mask)
    fused = ScaledDotProductAttention(fused=True)(q, k, v, mask)
    assert ref.shape == (2, 4, l_q, 8)
    torch.testing.assert_close(ref, fused, atol=1e-6, rtol=0)


def test_attention_formula_by_hand():
    """softmax(Q K^T / sqrt(d_k)) V on a 1-head example computed with plain loops."""
    torch.manual_seed(1)
    q, k, v = torch.randn(1, 1, 2, 3), torch.randn(1, 1, 4, 3), torch.randn(1, 1, 4, 5)
    out, weights = scaled_dot_product_attention(q, k, v)
    for i in range(2):
        s = torch.tensor([float(q[0, 0, i] @ k[0, 0, j]) / math.sqrt(3) for j in range(4)])
        w = s.exp() / s.exp().sum()
        torch.testing.assert_close(weights[0, 0, i], w, atol=1e-6, rtol=0)
        torch.testing.assert_close(out[0, 0, i], (w[:, None] * v[0, 0]).sum(0), atol=1e-6, rtol=0)


def test_fully_masked_row_is_zero_and_has_finite_gradients():
    q = torch.randn(1, 2, 3, 4, requires_grad=True)
    k, v = torch.randn(1, 2, 3, 4), torch.randn(1, 2, 3, 4)
    mask = torch.tensor([[True, True, False], [False, False, False], [True, False, False]])[None, None]
    for fused in (False, True):
        out = ScaledDotProductAttention(fused=fused)(q, k, v, mask)
        assert torch.all(out[:, :, 1] == 0)
        out.sum().backward()
        assert torch.isfinite(q.grad).all()
        q.grad = None


def same_random_affine(ours: nn.Module, weight: torch.Tensor, bias: torch.Tensor) -> None:
    """Draw a reference norm's gain and bias at random and give ours the same."""
    with torch.no_grad():
        weight.normal_()
        bias.normal_()
        ours.weight.copy_(weight)
        ours.bias.copy_(bias)


def test_layernorm_by_hand_equals_torch():
    # outputs reach ~9, where 1e-6 is one ulp: another kernel's summation order (ATEN_CPU_CAPABILITY=default measured
    # 0.72 of it) could break an absolute-only bound, so rtol 1e-6 (~8 ulps) scales it; a wrong eps or mean moves ~1e-3
    torch.manual_seed(0)
    x = torch.randn(3, 5, 32) * 4 + 2
    ours, theirs = LayerNorm(32, eps=1e-5, fused=False), nn.LayerNorm(32, eps=1e-5)
    same_random_affine(ours, theirs.weight, theirs.bias)
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)
    ours.fused = True
    torch.testing.assert_close(ours(x), theirs(x), atol=1e-6, rtol=1e-6)


def test_rmsnorm_by_hand_equals_torch_and_its_formula():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 32) * 4 + 2
    ours = RMSNorm(32, eps=1e-6, fused=False)
    with torch.no_grad():
        ours.weight.normal_()
    expected = x / torch.sqrt(x.pow(2).mean(-1, keepdim=True) + 1e-6) * ours.weight  # no mean, no bias
    torch.testing.assert_close(ours(x), expected, atol=1e-6, rtol=1e-6)
    ours.fused = True
    torch.testing.assert_close(ours(x), expected, atol=1e-6, rtol=1e-6)
    assert ours(x.bfloat16()).dtype == torch.float32  # float32 weight times the bf16 result, as Llama does


class SeedLayerNorm(nn.Module):
    """Seed 000's section 3.4, as printed there (its names a, b, features; eps=1e-6)."""

    def __init__(self, features, eps=1e-6):
        super().__init__()
        self.a = nn.Parameter(torch.ones(features))
        self.b = nn.Parameter(torch.zeros(features))
        self.eps = eps

    def forward(self, x):
        mean = x.mean(-1, keepdim=True)
        std = x.std(-1, keepdim=True)
        return self.a * (x - mean) / (std + self.eps) + self.b


def test_seed000_layernorm_is_the_seeds_formula_and_differs_from_the_papers():
    torch.manual_seed(0)
    x = torch.randn(3, 5, 32) * 4 + 2
    seed, ours = SeedLayerNorm(32), make_norm(ModelConfig(d_model=32, norm_kind="seed000", layer_norm_eps=1e-6))
    assert isinstance(ours, Seed000LayerNorm) and ours.eps == 1e-6
    same_random_affine(ours, seed.a, seed.b)
    torch.testing.assert_close(ours(x), seed(x), atol=1e-6, rtol=1e-6)
    # against the paper's (biased variance, eps under the root): before the affine, smaller by sqrt((D-1)/D)
    plain, paper = Seed000LayerNorm(32, eps=0.0), LayerNorm(32, eps=0.0)
    torch.testing.assert_close(plain(x), paper(x) * (31 / 32) ** 0.5, atol=1e-6, rtol=1e-6)
    # and eps: added to the std it caps 1 / std at 1 / eps, under the root at 1 / sqrt(eps), a far lower cap for
    # eps < 1: a near-constant row (std 1.6e-4) at eps 1e-3 comes out at 0.17 of full scale, against 0.006
    flat = torch.tensor([[1.0, 1.0 + 2e-4, 1.0, 1.0 - 2e-4]])
    assert LayerNorm(4, eps=1e-3)(flat).abs().max() < 0.01 < 0.1 < Seed000LayerNorm(4, eps=1e-3)(flat).abs().max()
    model = build_model(ModelConfig.preset("tiny", norm_kind="seed000"))
    assert {type(m) for m in model.modules() if isinstance(m, (LayerNorm, RMSNorm, Seed000LayerNorm))} == {
        Seed000LayerNorm}


@pytest.mark.parametrize("placement,formula", [
    ("post", lambda x, f, norm, drop: norm(x + drop(f(x)))),
    ("pre", lambda x, f, norm, drop: x + drop(f(norm(x)))),
    ("seed000", lambda x, f, norm, drop: x + drop(norm(f(x)))),
    ("seed003", lambda x, f, norm, drop: x + norm(f(x))),
])
def test_each_norm_placement_computes_its_formula(placement, formula):
    """In training mode with dropout 0.5, so that where the dropout sits (or that there is none) shows."""
    torch.manual_seed(0)
    x, f = torch.randn(2, 3, 8), nn.Linear(8, 8)
    norm = LayerNorm(8)
    with torch.no_grad():
        norm.weight.normal_()
        norm.bias.normal_()
    sub = SublayerConnection(norm=norm, dropout=0.5, placement=placement).train()
    torch.manual_seed(1)
    got = sub(x, f)
    torch.manual_seed(1)
    ln = lambda y: nn.functional.layer_norm(y, (8,), norm.weight, norm.bias)  # noqa: E731
    expected = formula(x, f, ln, lambda y: nn.functional.dropout(y, 0.5, training=True))
    torch.testing.assert_close(got, expected, atol=1e-6, rtol=0)
    without_dropout = formula(x, f, ln, lambda y: y)
    assert torch.allclose(got, without_dropout) == (placement == "seed003")  # the dropout acts where it sits
    with pytest.raises(ValueError, match="unknown norm placement"):
        SublayerConnection(norm=norm, dropout=0.0, placement="sandwich")


def test_make_norm_builds_every_norm_of_a_model():
    """norm_kind='rms' leaves no LayerNorm anywhere (sublayers, final norms, embedding norm, MLM head)."""
    config = ModelConfig.preset("bert-tiny", norm_kind="rms", head="mlm", mask_id=3)
    model = build_model(config)
    kinds = {type(m) for m in model.modules() if isinstance(m, (LayerNorm, RMSNorm))}
    assert kinds == {RMSNorm}
    assert sum(isinstance(m, RMSNorm) for m in model.modules()) == 2 * 4 + 1 + 1  # sublayers, embedding, head
    assert isinstance(make_norm(ModelConfig()), LayerNorm) and make_norm(ModelConfig()).eps == 1e-5
    model.set_fused(False)
    assert not any(m.fused for m in model.modules() if isinstance(m, RMSNorm))


def test_sinusoids_match_the_paper_formula():
    table = sinusoid_table(50, 16)
    for pos in (0, 7, 49):
        for i in range(8):
            angle = pos / 10000 ** (2 * i / 16)
            assert table[pos, 2 * i] == pytest.approx(math.sin(angle), abs=1e-6)
            assert table[pos, 2 * i + 1] == pytest.approx(math.cos(angle), abs=1e-6)
    concat = sinusoid_table(50, 16, "concat")
    torch.testing.assert_close(concat[:, :8], table[:, 0::2])
    torch.testing.assert_close(concat[:, 8:], table[:, 1::2])


def test_input_layer_scales_by_sqrt_d_model_and_adds_positions():
    layer = InputLayer(vocab_size=10, d_model=16, max_len=20, dropout=0.0, pad_id=0).eval()
    ids = torch.tensor([[3, 4, 5]])
    expected = layer.token.weight[ids] * 4.0 + sinusoid_table(20, 16)[:3]
    torch.testing.assert_close(layer(ids), expected)
    assert torch.all(layer.token.weight[0] == 0)  # the padding row starts at zero


@pytest.mark.parametrize("d_k,d_v", [(16, 16), (4, 16), (32, 8)])
def test_multihead_shapes_with_separate_d_k(d_k, d_v):
    mha = MultiHeadAttention(d_model=32, n_heads=4, d_k=d_k, d_v=d_v)
    assert mha.w_qkv.weight.shape == (4 * (2 * d_k + d_v), 32)
    assert mha.w_o.weight.shape == (32, 4 * d_v)
    assert mha(torch.randn(2, 5, 32)).shape == (2, 5, 32)
    cross = MultiHeadAttention(d_model=32, n_heads=4, d_k=d_k, d_v=d_v, cross=True)
    assert cross(torch.randn(2, 5, 32), torch.randn(2, 7, 32)).shape == (2, 5, 32)


def test_heads_are_independent():
    """Changing the values of head 1 only changes the head-1 slice before W_o: no mixing between heads."""
    torch.manual_seed(0)
    mha = MultiHeadAttention(d_model=8, n_heads=2, d_k=4, d_v=4, fused=False)
    captured = {}
    mha.attention.register_forward_hook(lambda m, i, o: captured.setdefault("out", o))
    x = torch.randn(1, 3, 8)
    mha(x)
    before = captured.pop("out")
    with torch.no_grad():
        mha.w_qkv.weight[8 + 8 + 4 :] += 1.0  # rows of W^V that feed head 1
    mha(x)
    after = captured.pop("out")
    torch.testing.assert_close(before[:, 0], after[:, 0])
    assert not torch.allclose(before[:, 1], after[:, 1])


def test_ffn_shapes_and_activation():
    ffn = PositionwiseFeedForward(d_model=8, d_ff=32, activation="relu")
    x = torch.randn(2, 3, 8)
    torch.testing.assert_close(ffn(x), ffn.w_2(torch.relu(ffn.w_1(x))))
    gelu = PositionwiseFeedForward(d_model=8, d_ff=32, activation="gelu-tanh")
    torch.testing.assert_close(gelu(x), gelu.w_2(nn.functional.gelu(gelu.w_1(x), approximate="tanh")))


@pytest.mark.parametrize("activation,fn", [("silu", nn.functional.silu), ("gelu", nn.functional.gelu)])
def test_gated_ffn_is_swiglu_or_geglu(activation, fn):
    """(act(x W_gate) * x W_up) W_2, with W_gate the first d_ff rows of w_1 and W_up the last d_ff."""
    torch.manual_seed(0)
    ffn = PositionwiseFeedForward(d_model=8, d_ff=12, activation=activation, bias=False, gated=True)
    assert ffn.w_1.weight.shape == (24, 8) and ffn.w_2.weight.shape == (8, 12)
    x = torch.randn(2, 3, 8)
    w_gate, w_up = ffn.w_1.weight[:12], ffn.w_1.weight[12:]
    torch.testing.assert_close(ffn(x), (fn(x @ w_gate.T) * (x @ w_up.T)) @ ffn.w_2.weight.T, atol=1e-6, rtol=0)


def test_masks_convention():
    ids = torch.tensor([[5, 6, 0], [7, 0, 0]])
    pm = padding_mask(ids, 0)
    assert pm.shape == (2, 1, 1, 3) and pm.dtype == torch.bool
    assert pm[1, 0, 0].tolist() == [True, False, False]
    cm = causal_mask(3)
    assert cm[0, 0].tolist() == [[True, False, False], [True, True, False], [True, True, True]]
    assert causal_mask(1, 4)[0, 0].tolist() == [[True, True, True, True]]  # bottom-right aligned
    assert combine(pm, cm).shape == (2, 1, 3, 3)
    assert combine(None, cm) is cm and combine(None, None) is None

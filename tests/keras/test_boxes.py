"""Box by box: each Keras layer of scratchformer/keras equals its PyTorch twin in model/ within 1e-5, on random
inputs with the same weights; the masks follow our convention; the whole tiny model too, for every choice the
port supports; configs it does not support are one line."""

from __future__ import annotations

import numpy as np
import pytest
import torch

from scratchformer import ModelConfig
from scratchformer.errors import ConfigError, InputError
from scratchformer.model import attention as t_attention
from scratchformer.model import embedding as t_embedding
from scratchformer.model import feedforward as t_feedforward
from scratchformer.model import norm as t_norm

from .conftest import copy_into, padded, require_keras, tiny_pair

require_keras()
sk = pytest.importorskip("scratchformer.keras")
TOL = 1e-5


def close(keras_out, torch_out, tol: float = TOL, rtol: float = 0.0) -> None:
    ours = torch_out.detach().numpy() if isinstance(torch_out, torch.Tensor) else torch_out
    np.testing.assert_allclose(numpy(keras_out), ours, atol=tol, rtol=rtol)


def numpy(x) -> np.ndarray:
    """A Keras / TensorFlow tensor as numpy (np.asarray on an EagerTensor warns under numpy 2)."""
    return x.numpy() if hasattr(x, "numpy") else np.asarray(x)


def rand(*shape: int, seed: int = 0) -> torch.Tensor:
    return torch.randn(*shape, generator=torch.Generator().manual_seed(seed))


@pytest.mark.parametrize("layout", ["interleaved", "concat"])
@pytest.mark.parametrize("d_model", [16, 7])
def test_sinusoid_table_is_ours(layout, d_model):
    close(sk.embedding.sinusoid_table(50, d_model, layout), t_embedding.sinusoid_table(50, d_model, layout), 1e-7)


@pytest.mark.parametrize("positions", ["sinusoidal", "sinusoidal-concat", "learned"])
def test_input_layer_is_ours(positions):
    ours = t_embedding.InputLayer(vocab_size=11, d_model=16, max_len=20, positions=positions, dropout=0.0).eval()
    theirs = sk.InputLayer(vocab_size=11, d_model=16, max_len=20, positions=positions, dropout=0.0)
    copy_into(theirs, ours)
    ids = torch.tensor([[1, 5, 7, 0], [3, 10, 0, 0]])
    close(theirs(ids.numpy()), ours(ids))
    close(theirs(ids.numpy(), offset=3), ours(ids, offset=3))


def test_token_embedding_starts_with_a_zero_padding_row_and_scales_by_sqrt_d():
    emb = sk.TokenEmbedding(9, 16, pad_id=0)
    table = numpy(emb.weight)
    assert not table[0].any() and table[1:].any()
    close(emb(np.array([[3]]))[0, 0], table[3] * 4.0)


def test_scaled_dot_product_attention_is_ours_and_an_all_masked_row_is_zero():
    q, k, v = rand(2, 3, 4, 8, seed=1), rand(2, 3, 5, 8, seed=2), rand(2, 3, 5, 6, seed=3)
    mask = torch.ones(2, 1, 4, 5, dtype=torch.bool)
    mask[0, 0, :, 3:] = False  # padding keys
    mask[1, 0, 2] = False  # one query sees nothing
    out, weights = sk.scaled_dot_product_attention(q.numpy(), k.numpy(), v.numpy(), mask.numpy())
    ref_out, ref_weights = t_attention.scaled_dot_product_attention(q, k, v, mask)
    close(out, ref_out)
    close(weights, ref_weights)
    assert not numpy(out)[1, :, 2].any() and np.isfinite(numpy(out)).all()


def test_a_float_mask_is_refused_in_one_line():
    q = rand(1, 1, 2, 4).numpy()
    with pytest.raises(InputError, match="must be a bool tensor, True = may attend") as err:
        sk.scaled_dot_product_attention(q, q, q, np.ones((1, 1, 2, 2), np.float32))
    assert "\n" not in str(err.value)


@pytest.mark.parametrize("cross", [False, True])
@pytest.mark.parametrize("shape", [dict(d_k=4, d_v=4), dict(d_k=3, d_v=5), dict(d_k=4, d_v=4, n_kv_heads=2)])
def test_multi_head_attention_is_ours_with_padding(cross, shape):
    args = dict(d_model=16, n_heads=4, **shape)
    ours = t_attention.MultiHeadAttention(**args, cross=cross, fused=False).eval()
    theirs = sk.MultiHeadAttention(**args, cross=cross)
    copy_into(theirs, ours)
    x, memory = rand(2, 5, 16, seed=4), rand(2, 7, 16, seed=5)
    mask = torch.ones(2, 1, 1, 7 if cross else 5, dtype=torch.bool)
    mask[1, ..., 3:] = False  # the second row is padded after 3 keys
    with torch.no_grad():
        ref = ours(x, memory if cross else None, mask)
    close(theirs(x.numpy(), memory.numpy() if cross else None, attn_mask=mask.numpy()), ref)


@pytest.mark.parametrize("activation", ["relu", "gelu", "gelu-tanh", "silu"])
@pytest.mark.parametrize("gated", [False, True])
def test_feed_forward_is_ours(activation, gated):
    ours = t_feedforward.PositionwiseFeedForward(d_model=16, d_ff=24, activation=activation, gated=gated).eval()
    theirs = sk.PositionwiseFeedForward(d_model=16, d_ff=24, activation=activation, gated=gated)
    copy_into(theirs, ours)
    x = rand(2, 5, 16, seed=6)
    with torch.no_grad():
        close(theirs(x.numpy()), ours(x))


@pytest.mark.parametrize("kind", ["layer", "rms", "seed000"])
def test_norms_are_ours(kind):
    ours = t_norm.NORMS[kind](16, eps=1e-5, fused=False)
    with torch.no_grad():  # weights away from their 1 / 0 init, so that they are really compared
        for p in ours.parameters():
            p.add_(rand(*p.shape, seed=7) * 0.5)
    theirs = sk.norm.make_norm(kind, 16, 1e-5)
    copy_into(theirs, ours)
    x = rand(3, 4, 16, seed=8) * 3 + 1
    with torch.no_grad():
        close(theirs(x.numpy()), ours(x))


@pytest.mark.parametrize("placement", ["post", "pre", "seed000", "seed003"])
def test_sublayer_connection_is_ours(placement):
    ffn = t_feedforward.PositionwiseFeedForward(d_model=16, d_ff=24).eval()
    ours = t_norm.SublayerConnection(norm=t_norm.LayerNorm(16), dropout=0.0, placement=placement).eval()
    theirs_ffn = sk.PositionwiseFeedForward(d_model=16, d_ff=24)
    theirs = sk.SublayerConnection(d_model=16, placement=placement)
    copy_into(theirs_ffn, ffn)
    copy_into(theirs, ours)
    x = rand(2, 5, 16, seed=9)
    with torch.no_grad():
        close(theirs(x.numpy(), sublayer=theirs_ffn), ours(x, ffn))


def test_masks_follow_our_convention():
    from scratchformer.model import masks as t_masks

    ids = torch.tensor([[4, 5, 0], [6, 0, 0]])
    assert (numpy(sk.padding_mask(ids.numpy(), 0)) == t_masks.padding_mask(ids, 0).numpy()).all()
    for l_q, l_k in ((4, 4), (1, 5), (2, 6)):
        assert (numpy(sk.causal_mask(l_q, l_k)) == t_masks.causal_mask(l_q, l_k).numpy()).all()


def test_encoder_and_decoder_layers_are_ours():
    model, keras_model = tiny_pair(1)
    src = torch.tensor(padded([[5, 6, 7, 2], [8, 2]]))
    tgt = torch.tensor(padded([[1, 9, 10], [1, 11]]))
    with torch.no_grad():
        memory = model.encode(src)
        hidden = model.decode(memory, model.src_mask(src), tgt)
    close(keras_model.encode(src.numpy()), memory)
    close(keras_model.decode(memory.numpy(), keras_model.src_mask(src.numpy()), tgt.numpy()), hidden)


CONFIGS = {
    "paper (tied)": {},
    "untied": dict(tie_embeddings=False),
    "shared vocab tied, pre-norm": dict(norm_placement="pre"),
    "seed000": dict(norm_placement="seed000"),
    "seed000's LayerNorm": dict(norm_kind="seed000", layer_norm_eps=1e-6),
    "seed003, rms": dict(norm_placement="seed003", norm_kind="rms"),
    "llama-ish": dict(ffn_kind="gated", activation="silu", n_kv_heads=2, bias=False, generator_bias=False),
    "learned positions, d_k 8, d_v 12": dict(positions="learned", d_k=8, d_v=12, tie_embeddings=False),
    "concat sinusoids, gelu": dict(positions="sinusoidal-concat", activation="gelu"),
}


@pytest.mark.parametrize("overrides", list(CONFIGS.values()), ids=list(CONFIGS))
def test_whole_model_logits_are_ours_with_padding(overrides):
    """Logits reach ~13 (seed003 grows the residual stream): 1e-5 plus 1e-6 relative; measured <= 2.9e-6."""
    model, keras_model = tiny_pair(2, double=False, **overrides)
    src = padded([[5, 6, 7, 8, 2], [9, 2], [10, 11, 12, 2]])
    tgt = padded([[1, 13, 14, 15], [1, 16], [1, 17, 18]])
    with torch.no_grad():
        ref = model(torch.tensor(src), torch.tensor(tgt))
    close(keras_model((src, tgt)), ref, rtol=1e-6)


def test_different_source_and_target_vocabularies_tie_the_target_side_only():
    model, keras_model = tiny_pair(3, vocab=23)  # shared vocab: one matrix for all three
    assert keras_model.src_embed.token is keras_model.tgt_embed.token
    config = ModelConfig.preset("tiny", src_vocab_size=30, tgt_vocab_size=20)
    other = sk.build_keras_model(config)
    assert other.src_embed.token is not other.tgt_embed.token and other.generator.proj is None


@pytest.mark.parametrize("field, value, message", [
    ("arch", "decoder", "arch='decoder': the Keras port builds the encoder-decoder only"),
    ("positions", "rope", "positions='rope'"),
])
def test_unsupported_configs_are_one_line(field, value, message):
    extra = {"n_encoder_layers": 0} if value == "decoder" else {}
    config = ModelConfig.preset("tiny", **{field: value}, **extra)
    with pytest.raises(ConfigError, match=message) as err:
        sk.build_keras_model(config)
    assert "\n" not in str(err.value)


def test_dropout_runs_only_with_training_true():
    _, keras_model = tiny_pair(4, dropout=0.5)
    src, tgt = padded([[5, 6, 2]]), padded([[1, 7, 8]])
    eval_a, eval_b = keras_model((src, tgt)), keras_model((src, tgt), training=False)
    close(eval_a, eval_b, 0.0)
    assert np.abs(numpy(keras_model((src, tgt), training=True)) - numpy(eval_a)).max() > 1e-3


def test_import_does_not_import_torch():
    """A TensorFlow user's process: `import scratchformer.keras` (and building a model) never loads torch."""
    import subprocess
    import sys

    code = ("import sys, scratchformer.keras as sk; from scratchformer import ModelConfig; "
            "sk.build_keras_model(ModelConfig.preset('tiny')); print('torch' in sys.modules)")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, timeout=300)
    assert out.returncode == 0, out.stderr[-2000:]
    assert out.stdout.strip() == "False"


def test_a_saved_keras_file_reloads_with_the_same_outputs(tmp_path):
    import keras

    _, keras_model = tiny_pair(5, tie_embeddings=False, norm_placement="pre")
    src, tgt = padded([[5, 6, 2], [7, 2]]), padded([[1, 8, 9], [1, 10]])
    keras_model.save(str(tmp_path / "m.keras"))
    again = keras.models.load_model(str(tmp_path / "m.keras"))
    close(again((src, tgt)), numpy(keras_model((src, tgt))), 0.0)
    assert again.model_config == keras_model.model_config


def test_the_run_file_names_are_runs_own():
    from scratchformer.keras import build
    from scratchformer.runs import layout

    assert build.CONFIG_FILE in layout.RUN_ENTRIES and build.WEIGHTS_FILE in layout.RUN_ENTRIES

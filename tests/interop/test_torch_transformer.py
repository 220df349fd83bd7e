"""Parity with torch.nn.Transformer: same weights, same outputs (float32, max abs diff < 1e-5)."""

import pytest
import torch

from scratchformer import ModelConfig, build_model
from scratchformer.interop.torch_transformer import from_torch_transformer, to_torch_transformer
from scratchformer.model.masks import causal_mask

PAD = 0


def _batch(seed=0, vocab=50):
    g = torch.Generator().manual_seed(seed)
    src = torch.randint(1, vocab, (3, 9), generator=g)
    tgt = torch.randint(1, vocab, (3, 7), generator=g)
    src[0, 6:] = PAD  # padding in play on both sides
    src[2, 4:] = PAD
    tgt[1, 5:] = PAD
    return src, tgt


def _reference_logits(model, ref, src, tgt):
    """Our embeddings and generator around nn.Transformer's encoder/decoder."""
    src_kpm, tgt_kpm = src == PAD, tgt == PAD  # torch convention: True = ignore
    tgt_causal = ~causal_mask(tgt.size(1))[0, 0]  # (L, L), True = ignore
    out = ref(model.src_embed(src), model.tgt_embed(tgt), tgt_mask=tgt_causal, src_key_padding_mask=src_kpm,
              tgt_key_padding_mask=tgt_kpm, memory_key_padding_mask=src_kpm)
    return model.generator.logits(out)


@pytest.mark.parametrize("norm", ["post", "pre"])
@pytest.mark.parametrize("fused", [True, False])
def test_export_to_nn_transformer_gives_same_logits(norm, fused):
    torch.manual_seed(0)
    config = ModelConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=50, norm=norm, final_norm=True,
                                dropout=0.1, fused=fused)
    model = build_model(config).eval()
    with torch.no_grad():  # move every weight off its init (LayerNorm ones/zeros too) so a mix-up shows
        for p in model.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    ref = to_torch_transformer(model).eval()
    src, tgt = _batch()
    with torch.no_grad():
        ours = model(src, tgt)
        theirs = _reference_logits(model, ref, src, tgt)
    real = tgt != PAD
    assert (ours - theirs)[real].abs().max() < 1e-5


@pytest.mark.parametrize("norm", ["post", "pre"])
def test_import_from_nn_transformer_gives_same_logits(norm):
    torch.manual_seed(1)
    ref = torch.nn.Transformer(64, 4, 2, 3, 128, 0.0, batch_first=True, norm_first=norm == "pre").eval()
    with torch.no_grad():
        for p in ref.parameters():
            p.add_(torch.randn_like(p) * 0.1)
    config = ModelConfig.preset("tiny", src_vocab_size=50, tgt_vocab_size=50, norm=norm, n_decoder_layers=3)
    model = from_torch_transformer(ref, config).eval()
    src, tgt = _batch(seed=2)
    with torch.no_grad():
        diff = (model(src, tgt) - _reference_logits(model, ref, src, tgt))[tgt != PAD]
    assert diff.abs().max() < 1e-5


def test_incompatible_config_is_one_clear_line():
    model = build_model(ModelConfig.preset("tiny", final_norm=False))
    with pytest.raises(ValueError, match="final_norm"):
        to_torch_transformer(model)

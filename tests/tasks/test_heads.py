"""Task heads: shapes, tying, first-token pooling, EncoderOnly untouched, and whole models rebuilt from a run."""

import pytest
import torch

from scratchformer import ConfigError, ModelConfig, build_model
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.model.build import EncoderForClassification, EncoderForMLM
from scratchformer.model.heads import ClassificationHead, MLMHead, with_head
from scratchformer.model.transformer import EncoderOnly
from scratchformer.runs import load_run, save_weights, state_dict_for_saving

B, L, D, V, K = 3, 7, 32, 50, 4


def encoder_config(**extra) -> ModelConfig:
    return ModelConfig.preset("bert-tiny", tgt_vocab_size=V, d_model=D, n_heads=2, d_ff=64, n_encoder_layers=2,
                              **extra)


def ids(seed: int = 0) -> torch.Tensor:
    x = torch.randint(4, V, (B, L), generator=torch.Generator().manual_seed(seed))
    x[:, 0], x[1, 5:] = 1, 0  # <s> first; row 1 right-padded
    return x


def test_mlm_head_shapes_and_tied_decoder():
    embedding = torch.nn.Parameter(torch.randn(V, D))
    head = MLMHead(embedding=embedding, norm=torch.nn.LayerNorm(D))
    assert head(torch.randn(B, L, D)).shape == (B, L, V)
    assert head.decoder.weight is embedding and head.decoder.bias.shape == (V,)
    model = EncoderForMLM(with_head(encoder_config(), "mlm"))
    assert model.mlm_head.decoder.weight is model.base.embed.token.weight
    assert model(ids()).shape == (B, L, V)


def test_mlm_select_scores_only_the_chosen_positions():
    model = EncoderForMLM(with_head(encoder_config(), "mlm")).eval()
    x = ids()
    select = torch.zeros(B, L, dtype=torch.bool)
    select[0, 2], select[2, 4], select[2, 6] = True, True, True
    out = model(x, select=select)
    assert out.shape == (3, V)
    assert torch.allclose(out, model(x)[select], atol=1e-5)


def test_classification_head_shapes_and_first_token_pooling():
    head = ClassificationHead(D, K, dropout=0.1).eval()
    hidden = torch.randn(B, L, D)
    out = head(hidden)
    assert out.shape == (B, K)
    changed = hidden.clone()
    changed[:, 1:] = torch.randn(B, L - 1, D)
    assert torch.equal(head(changed), out)  # only position 0 (<s>, BERT's [CLS]) is read
    changed[:, 0] += 1.0
    assert not torch.allclose(head(changed), out)
    with pytest.raises(ConfigError, match="at least 2 classes"):
        ClassificationHead(D, 1)


def test_encoder_for_classification_shapes_and_labels():
    config = with_head(encoder_config(), "classification", n_classes=K, labels=["a", "b", "c", "d"])
    model = EncoderForClassification(config)
    assert model(ids()).shape == (B, K) and model.labels == ["a", "b", "c", "d"]
    with pytest.raises(ConfigError, match="n_classes"):
        EncoderForClassification(with_head(encoder_config(), "classification"))
    with pytest.raises(ConfigError, match="encoder"):
        with_head(ModelConfig.preset("gpt-tiny"), "mlm")


@pytest.mark.parametrize("head", ["mlm", "classification"])
def test_the_wrapped_encoder_is_an_unchanged_encoder_only(head):
    config = with_head(encoder_config(dropout=0.0, attention_dropout=0.0), head, n_classes=K)
    model = build_model(config).eval()
    assert type(model).__name__ == {"mlm": "EncoderForMLM", "classification": "EncoderForClassification"}[head]
    plain = EncoderOnly(encoder_config(dropout=0.0, attention_dropout=0.0)).eval()
    plain.load_state_dict(model.base.state_dict())
    assert torch.equal(plain(ids()), model.base(ids()))
    assert type(build_model(encoder_config())) is EncoderOnly  # no head in the config: the bare encoder


@pytest.mark.parametrize("head", ["mlm", "classification"])
def test_load_run_rebuilds_the_whole_model(head, tmp_path):
    tok = train_tokenizer("char", ["abcdefghijklmnopqrstuvwxyz0123456789 .,;:!?ABCDEFGHIJKLMN"])
    config = with_head(encoder_config(), head, n_classes=K, labels=list("wxyz"))
    config = config.replace(tgt_vocab_size=tok.vocab_size)
    model = build_model(config).eval()
    saved = state_dict_for_saving(model)
    if head == "mlm":
        assert "mlm_head.decoder.weight" not in saved  # the tied matrix is stored once
    config.save(tmp_path / "config.json")
    tok.save(tmp_path / "tokenizer_tgt.json")
    save_weights(model, tmp_path / "model.safetensors")
    run = load_run(tmp_path)
    assert type(run.model) is type(model)
    x = ids() % tok.vocab_size
    # load_run may give the inference layout (column-major weights), where MKL picks other kernels: equal to 1e-6
    with torch.no_grad():
        torch.testing.assert_close(run.model(x), model(x), atol=1e-6, rtol=0)

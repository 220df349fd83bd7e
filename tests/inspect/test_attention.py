"""Attention of every kind: the weights drawn are the model's own (rows sum to 1, the decoder's self-attention is
causal, cross-attention spans the source), each axis holds the right tokens, and the CLI picks layer and head."""

import pytest
import torch

from scratchformer.cli import main
from scratchformer.errors import InputError
from scratchformer.inspect.attention import KINDS, attention_maps, cross_attention, select
from scratchformer.runs import load_run

PNG = b"\x89PNG"


@pytest.fixture(scope="module")
def run(tiny_run):
    return load_run(tiny_run)


def test_every_kind_every_layer_has_the_shape_of_its_axes(run):
    maps = attention_maps(run, "how are you", "你好吗")
    config = run.model_config
    assert maps.src_labels == list("how are you") + ["</s>"]
    assert maps.tgt_in_labels == ["<s>", "你", "好", "吗"] and maps.tgt_labels == ["你", "好", "吗", "</s>"]
    for kind in KINDS:
        keys, queries = maps.axes(kind)
        layers = maps.weights[kind]
        assert len(layers) == (config.n_encoder_layers if kind == "self" else config.n_decoder_layers)
        for w in layers:
            assert w.shape == (config.n_heads, len(queries), len(keys))
            assert torch.allclose(w.sum(-1), torch.ones(w.shape[:2]), atol=1e-5)  # softmax rows
    causal = maps.weights["decoder-self"][0]
    assert causal.triu(1).abs().max() == 0 and causal[:, 1:, :].tril(-1).sum() > 0  # no future, some past
    assert run.model.decoder.layers[0].self_attn.attention.keep_weights is False  # switched off again


def test_cross_attention_keeps_its_old_contract(run):
    weights, src, tgt = cross_attention(run, "hello", "你好", layer=-1)
    maps = attention_maps(run, "hello", "你好")
    assert torch.equal(weights, maps.weights["cross"][-1]) and src == maps.src_labels and tgt == maps.tgt_labels


def test_select_picks_one_layer_and_head_or_all(run):
    maps = attention_maps(run, "hello", "你好")
    rows, names = select(maps, "cross")
    assert len(rows) == run.model_config.n_decoder_layers and len(rows[0]) == run.model_config.n_heads
    rows, names = select(maps, "self", layer=2, head=1)
    assert names == [["layer 2, head 1"]] and torch.equal(rows[0][0], maps.weights["self"][1][0])
    with pytest.raises(InputError, match="--head 9: the model has"):
        select(maps, "self", head=9)
    with pytest.raises(InputError, match="--layer 0"):
        select(maps, "cross", layer=0)


@pytest.mark.parametrize("kind", ["self", "decoder-self", "cross"])
def test_plot_attention_command_writes_each_kind(capsys, tiny_run, tmp_path, kind):
    out = tmp_path / f"{kind}.png"
    assert main(["plot", "attention", str(tiny_run), "hello", "--kind", kind, "--layer", "1", "--head", "all",
                 "--translation", "你好", "--out", str(out)]) == 0
    assert out.read_bytes()[:4] == PNG and f"wrote {out}" in capsys.readouterr().out


@pytest.mark.parametrize("args,needle", [
    (["--head", "x"], "--head x: give a number"),
    (["--layer", "7"], "--layer 7: the model has 2"),
    ([], None),
])
def test_plot_attention_bad_flags_are_one_line(capsys, tiny_run, tmp_path, args, needle):
    code = main(["plot", "attention", str(tiny_run), "hello", "--out", str(tmp_path / "a.png"), *args])
    err = capsys.readouterr().err
    if needle is None:  # the model's own (greedy) translation, every layer and head
        assert code == 0 and (tmp_path / "a.png").read_bytes()[:4] == PNG
    else:
        assert code == 2 and needle in err and err.count("\n") == 1


def test_plot_attention_needs_a_run_and_a_sentence(capsys, tmp_path):
    assert main(["plot", "attention", "--out", str(tmp_path / "a.png")]) == 2
    assert "needs a run and a sentence" in capsys.readouterr().err


def test_a_language_model_run_is_refused_in_one_line(capsys, tmp_path):
    from scratchformer.config import ModelConfig
    from scratchformer.data.tokenizers import train_tokenizer
    from scratchformer.model import build_model
    from scratchformer.runs import save_weights

    tok = train_tokenizer("char", ["hello world"])
    config = ModelConfig.preset("gpt-tiny", tgt_vocab_size=tok.vocab_size)
    (tmp_path / "lm").mkdir()
    config.save(tmp_path / "lm" / "config.json")
    tok.save(tmp_path / "lm" / "tokenizer_tgt.json")
    save_weights(build_model(config), tmp_path / "lm" / "model.safetensors")
    for argv in (["plot", "attention", str(tmp_path / "lm"), "hello", "--translation", "", "--out", "a.png"],
                 ["report", str(tmp_path / "lm"), "--out", str(tmp_path / "r.html")]):
        assert main(argv) == 2
        err = capsys.readouterr().err
        assert "decoder model" in err and "encoder-decoder" in err and err.count("\n") == 1


def test_plot_attention_draws_the_translation_its_caller_made(capsys, tiny_run, tmp_path, monkeypatch):
    """plot attention translates through engines.Translator (the run's decoding.json), as translate does, and
    hands inspect the text; inspect itself never translates (it sits below engines/)."""
    import inspect as pyinspect

    from scratchformer.engines import Translator
    from scratchformer.inspect import attention

    seen = []

    def translate(self, texts, *args, **kwargs):
        seen.append(self.options)
        return ["月山"]

    monkeypatch.setattr(Translator, "translate", translate)
    out = tmp_path / "a.png"
    assert main(["plot", "attention", str(tiny_run), "hello", "--layer", "1", "--out", str(out)]) == 0
    assert "hello -> 月山" in capsys.readouterr().out and out.read_bytes()[:4] == PNG
    assert seen == [load_run(tiny_run).decoding]
    assert pyinspect.signature(attention.plot_sentence_attention).parameters["translation"].default is \
        pyinspect.Parameter.empty

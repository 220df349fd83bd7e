"""ModelConfig's typed choices (one table each), its head fields, and old config.json files that kept the head in
`extra`."""

import json
import typing

import pytest

from scratchformer import ConfigError, ModelConfig, build_model
from scratchformer.cli import main
from scratchformer.cli.common import parse_overrides
from scratchformer.config import ACTIVATIONS, ARCHS, NORM_KINDS, NORMS, POSITIONS
from scratchformer.config.model import Activation, Arch, Head
from scratchformer.model import feedforward, norm
from scratchformer.model.build import ARCHITECTURES, HEADS, EncoderForClassification, EncoderForMLM
from scratchformer.model.heads import with_head

BERT = dict(tgt_vocab_size=60, d_model=32, n_heads=2, d_ff=64, n_encoder_layers=1)


def test_each_choice_is_written_once():
    hints = typing.get_type_hints(ModelConfig)
    assert typing.get_args(hints["activation"]) == typing.get_args(Activation) == ACTIVATIONS
    assert set(ACTIVATIONS) == set(feedforward.ACTIVATIONS)  # the module table has exactly the Literal's names
    assert set(typing.get_args(Arch)) == set(ARCHS) == set(ARCHITECTURES)
    assert set(typing.get_args(Head)) == set(HEADS)
    assert NORMS == norm.PLACEMENTS == ("post", "pre", "seed000", "seed003")
    assert NORM_KINDS == tuple(norm.NORMS) == ("layer", "rms", "seed000")
    assert POSITIONS == ("sinusoidal", "sinusoidal-concat", "learned", "rope")


def test_a_choice_outside_its_literal_is_a_one_line_error():
    for field, value in (("arch", "mixture"), ("norm_placement", "sandwich"), ("norm_kind", "batch"),
                         ("positions", "rotary"), ("activation", "tanh")):
        with pytest.raises(ConfigError, match=f"{field}={value!r} is not one of"):
            ModelConfig(**{field: value})
    with pytest.raises(ConfigError, match="norm_placement=5 must be str"):
        ModelConfig(norm_placement=5)


def test_literal_fields_parse_from_key_value_text(capsys):
    assert parse_overrides(["norm=pre", "activation=gelu-tanh", "head=none", "labels=[\"a\", \"b\"]"]) == {
        "norm_placement": "pre", "activation": "gelu-tanh", "head": None, "labels": ["a", "b"]}
    assert main(["params", "--preset", "tiny", "norm=pre", "positions=learned", "activation=silu"]) == 0
    assert "encoder: final layer norm" in capsys.readouterr().out
    assert main(["params", "--preset", "tiny", "norm=sandwich"]) == 2
    assert "norm_placement='sandwich' is not one of post, pre, seed000, seed003" in capsys.readouterr().err


def test_head_fields_are_validated():
    with pytest.raises(ConfigError, match="encoder"):
        ModelConfig(head="mlm")
    with pytest.raises(ConfigError, match="n_classes >= 2"):
        ModelConfig.preset("bert-tiny", head="classification", n_classes=1)
    with pytest.raises(ConfigError, match="labels names 2 classes, n_classes=3"):
        ModelConfig.preset("bert-tiny", head="classification", n_classes=3, labels=["a", "b"])
    with pytest.raises(ConfigError, match="mask_id=1000 is outside"):
        ModelConfig.preset("bert-tiny", mask_id=1000)
    with pytest.raises(ConfigError, match="head='seq2seq' is not one of mlm, classification"):
        ModelConfig.preset("bert-tiny", head="seq2seq")


def test_with_head_sets_the_fields_and_keeps_other_notes_in_extra():
    config = with_head(ModelConfig.preset("bert-tiny", **BERT), "classification", n_classes=2, labels=["n", "p"],
                       source="test")
    assert (config.head, config.n_classes, config.labels, config.extra) == ("classification", 2, ["n", "p"],
                                                                             {"source": "test"})
    assert type(build_model(config)) is EncoderForClassification


def test_an_old_config_json_with_the_head_in_extra_still_loads(tmp_path):
    old = {**ModelConfig.preset("bert-tiny", **BERT).to_dict()}
    for name in ("head", "n_classes", "labels", "mask_id"):
        del old[name]  # an old file has no such fields, only the notes in `extra`
    old["extra"] = {"head": "classification", "n_classes": 2, "labels": ["neg", "pos"], "mask_id": 59, "init": "r"}
    (tmp_path / "config.json").write_text(json.dumps(old), encoding="utf-8")
    config = ModelConfig.load(tmp_path / "config.json")
    assert (config.head, config.n_classes, config.labels, config.mask_id) == ("classification", 2, ["neg", "pos"], 59)
    assert config.extra == {"init": "r"}  # the head's keys moved into the fields; other notes stay
    model = build_model(config)
    assert type(model) is EncoderForClassification and model.labels == ["neg", "pos"]
    config.save(tmp_path / "new.json")
    assert ModelConfig.load(tmp_path / "new.json") == config
    old["extra"] = {"head": "mlm", "mask_id": 59}
    assert type(build_model(ModelConfig.from_dict(old))) is EncoderForMLM
    with pytest.raises(ConfigError, match="disagrees with extra"):
        ModelConfig.from_dict({**old, "mask_id": 3})
    with pytest.raises(ConfigError, match="n_classes='2' must be int"):
        ModelConfig.from_dict({**old, "extra": {"head": "classification", "n_classes": "2"}})


def test_old_config_files_with_norm_still_load(tmp_path):
    """Before norm_kind existed, `norm` held the placement: such config.json files, presets and overrides still load."""
    old = ModelConfig.preset("tiny").to_dict()
    old["norm"] = old.pop("norm_placement")
    old.pop("norm_kind")
    old["norm"] = "pre"
    path = tmp_path / "config.json"
    path.write_text(json.dumps(old), encoding="utf-8")
    config = ModelConfig.load(path)
    assert (config.norm_placement, config.norm_kind, config.use_final_norm) == ("pre", "layer", True)
    assert "norm" not in config.to_dict()
    assert ModelConfig.preset("tiny", norm="pre") == ModelConfig.preset("tiny", norm_placement="pre")
    assert ModelConfig.preset("gpt-tiny", norm="post").norm_placement == "post"  # an override beats the preset
    with pytest.raises(ConfigError, match="norm='pre' .*disagrees with norm_placement='post'"):
        ModelConfig.from_dict({"norm": "pre", "norm_placement": "post"})
    with pytest.raises(ConfigError, match="norm_placement='mid' is not one of"):
        ModelConfig.from_dict({"norm": "mid"})


@pytest.mark.parametrize("preset,overrides", [("llama-tiny", {}), ("llama-tiny", {"n_kv_heads": 1}),
                                              ("llama-tiny", {"tie_embeddings": False, "n_kv_heads": 4})])
def test_params_of_llama_configs_equal_the_closed_form_with_gqa_and_a_gated_ffn(preset, overrides):
    """No biases: the exact count is the closed form's matrices plus the RMSNorm weights (2 per layer + final)."""
    from scratchformer.config import parameter_bytes
    from scratchformer.inspect.params import closed_form

    c = ModelConfig.preset(preset, **overrides)
    d, h, kv, dk, n = c.d_model, c.n_heads, c.kv_heads, c.head_dim_k, c.n_decoder_layers
    by_hand = n * (d * (h + 2 * kv) * dk + h * dk * d + 3 * d * c.d_ff) + c.tgt_vocab_size * d * (
        1 if c.tie_embeddings else 2)
    assert closed_form(c) == by_hand
    model = build_model(c)
    assert model.num_parameters() == by_hand + (2 * n + 1) * d
    assert 0.9 <= parameter_bytes(c) / (4 * model.num_parameters()) <= 1.1


def test_smollm2_sizes_count_its_published_134_5m(capsys):
    assert main(["params", "--preset", "smollm2-135m"]) == 0
    out = capsys.readouterr().out
    assert "134,515,008" in out and "= 134.52M" in out
    assert "rope: turns q and k, no parameters" in out

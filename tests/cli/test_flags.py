"""A CLI a newcomer can hold (issue 43): the flags that went away fail with one line naming their replacement, train's
rare settings are KEY=VALUE keys (TrainConfig's and the model's, listed by --help), generate / chat's sampling is
`--set KEY=VALUE`, the three max_len are named for what each means (old files still load), and the flags are
counted."""

from __future__ import annotations

import argparse
import dataclasses
import json

import pytest

from scratchformer.cli import build_parser, main
from scratchformer.cli.common import apply_sets, parse_train_settings
from scratchformer.config import ModelConfig, TrainConfig
from scratchformer.config.train import TRAIN_FLAGS
from scratchformer.errors import ConfigError

MOST_FLAGS = 130  # issue 43's target: every command's --flags together, --lang counted on each


def _commands() -> dict[str, argparse.ArgumentParser]:
    parser = build_parser()
    return next(a for a in parser._actions if isinstance(a, argparse._SubParsersAction)).choices


def _retired() -> list[tuple[str, str, str]]:
    return [(name, flag, replacement) for name, sub in _commands().items()
            for flag, replacement in (sub.get_default("retired_flags") or {}).items()]


def _required_positionals(sub: argparse.ArgumentParser) -> list[str]:
    return [list(a.choices)[0] if a.choices else "x" for a in sub._actions
            if not a.option_strings and a.nargs is None and a.required]


# -- each flag that went away: one line naming its replacement ------------------------------------------------------
@pytest.mark.parametrize("command, flag, replacement", _retired(), ids=lambda v: str(v)[:40])
def test_a_retired_flag_is_one_line_naming_its_replacement(capsys, command, flag, replacement):
    sub = _commands()[command]
    with pytest.raises(SystemExit) as exit:
        main([command, *_required_positionals(sub), flag, "7"])
    err = capsys.readouterr().err
    assert exit.value.code == 2 and len(err.strip().splitlines()) == 1, err
    assert f"{flag} is gone: use {replacement.replace('{value}', '7')}" in err


def test_every_train_setting_that_is_no_flag_is_retired_with_its_key():
    retired = _commands()["train"].get_default("retired_flags")
    for f in dataclasses.fields(TrainConfig):
        if f.name not in TRAIN_FLAGS and f.name != "model":
            assert retired[f"--{f.name.replace('_', '-')}"] == f"{f.name}={{value}}"
    assert retired["--max-len"] == "max_sentence_len={value}"


@pytest.mark.parametrize("argv, words", [
    (["train", "--warmup", "4000"], "--warmup is gone: use warmup=4000"),
    (["train", "--max-len=64"], "--max-len is gone: use max_sentence_len=64"),
    (["generate", "run", "--temperature", "0.5", "a prompt"], "--temperature is gone: use --set temperature=0.5"),
    (["chat", "model.gguf", "--top-k", "5"], "--top-k is gone: use --set top_k=5"),
    (["plot", "positions", "--max-len", "50"], "--max-len is gone: use --max-positions 50"),
    (["shapes", "--src-len", "12"], "--src-len is gone: use --lengths 12,TGT"),
])
def test_the_replacement_carries_the_value_given(capsys, argv, words):
    with pytest.raises(SystemExit):
        main(argv)
    assert words in capsys.readouterr().err


# -- train: KEY=VALUE for TrainConfig's fields and the model's -------------------------------------------------------
def test_train_keys_are_typed_by_their_field_and_split_between_the_configs():
    train, model = parse_train_settings(["warmup=50", "clip_norm=none", "label-smoothing=0.2", "fsdp=false",
                                         "src_vocab_size=300", "d_model=64", "norm=pre", "max_positions=32"])
    assert train == {"warmup": 50, "clip_norm": None, "label_smoothing": 0.2, "fsdp": False, "src_vocab_size": 300}
    assert model == {"d_model": 64, "norm_placement": "pre", "max_positions": 32}


@pytest.mark.parametrize("items, words", [
    (["nope=1"], ["unknown KEY 'nope'", "training keys: task", "warmup", "model keys: arch", "d_model"]),
    (["warmup=soon"], ["warmup='soon'", "int"]),
    (["max_len=64"], ["max_len= is gone", "max_sentence_len=", "max_positions="]),
])
def test_bad_train_keys_are_one_line(items, words):
    with pytest.raises(ConfigError) as error:
        parse_train_settings(items)
    assert all(w in str(error.value) for w in words) and "\n" not in str(error.value)


def test_a_train_key_reaches_the_settings_that_train_launches(monkeypatch, tmp_path, capsys):
    import scratchformer.training.launch as launch

    seen = {}

    def fake_launch(given, out, **kw):
        seen.update(given)
        raise ConfigError("stopped by the test")

    monkeypatch.setattr(launch, "launch", fake_launch)
    code = main(["train", "--recipe", "toy", "--out", str(tmp_path / "run"), "warmup=7", "max_sentence_len=20",
                 "d_model=32", "--max-steps", "3", "time_limit=1.5"])
    assert code == 2 and "stopped by the test" in capsys.readouterr().err
    assert seen["warmup"] == 7 and seen["max_sentence_len"] == 20 and seen["max_steps"] == 3
    assert seen["time_limit"] == 1.5 and seen["model"] == {"dropout": 0.0, "d_model": 32}  # the toy recipe's too
    TrainConfig.from_dict(seen)  # what launch builds from it


def test_an_unknown_train_key_is_one_line_from_the_command(capsys, tmp_path):
    assert main(["train", "--out", str(tmp_path / "run"), "wramup=10"]) == 2
    err = capsys.readouterr().err
    assert "unknown KEY 'wramup'" in err and len(err.strip().splitlines()) == 1
    assert not (tmp_path / "run").exists()


def test_train_help_lists_every_key_with_its_meaning_and_default(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help"])
    out = capsys.readouterr().out
    keys = out.split("KEY=VALUE training settings", 1)[1]
    for f in dataclasses.fields(TrainConfig):
        if f.name not in TRAIN_FLAGS and f.name != "model":
            assert f"\n  {f.name}= " in keys, f.name
    flat = " ".join(keys.split())
    assert "warmup= updates of linear learning-rate warm-up (Noam schedule) (default: 1000 from the demo recipe" in flat
    assert "(default: none)" in flat.split("time_limit=", 1)[1].split("=", 1)[0]
    model = " ".join(keys.split("KEY=VALUE model settings", 1)[1].split())
    assert "d_model" in model and "max_positions" in model and "norm_placement" in model


def test_train_help_lists_the_keys_in_chinese(capsys):
    with pytest.raises(SystemExit):
        main(["train", "--help", "--lang", "zh"])
    out = capsys.readouterr().out
    assert "键=值" in out and "学习率" in out.split("\n  warmup=", 1)[1].split("\n  ")[0]


# -- generate / chat: --set KEY=VALUE ---------------------------------------------------------------------------------
def test_set_reaches_the_sampling_settings():
    args = build_parser().parse_args(["generate", "run", "hi", "--set", "temperature=0", "--set", "top_k=5",
                                      "--set", "seed=3", "--set", "truncate=error", "--set", "batch_size=4"])
    assert args.temperature == 0.8 and args.top_k is None  # defaults until --set is read
    apply_sets(args)
    assert (args.temperature, args.top_k, args.seed, args.truncate, args.batch_size) == (0.0, 5, 3, "error", 4)


@pytest.mark.parametrize("argv, words", [
    (["chat", "m", "--set", "truncate=left"], "--set truncate: unknown key; keys: temperature, top_k, top_p, seed"),
    (["generate", "r", "--set", "top_k=many"], "--set top_k=many: cannot read it as int"),
    (["generate", "r", "--set", "temperature"], "not KEY=VALUE"),
])
def test_bad_set_is_one_line(capsys, argv, words):
    assert main(argv) == 2
    err = capsys.readouterr().err
    assert words in err and len(err.strip().splitlines()) == 1


@pytest.mark.parametrize("command, keys", [("generate", ["temperature", "top_k", "top_p", "seed", "truncate",
                                                          "batch_size", "weights"]),
                                           ("chat", ["temperature", "top_k", "top_p", "seed"])])
def test_help_lists_the_set_keys_with_their_defaults(capsys, command, keys):
    with pytest.raises(SystemExit):
        main([command, "--help"])
    listed = capsys.readouterr().out.split("keys of --set KEY=VALUE:", 1)[1]
    assert [line.split("=")[0].strip() for line in listed.splitlines() if line.startswith("  ") and
            not line.startswith("   ")] == keys
    assert "(default: 0.8)" in listed and "(default: 0.95)" in listed


# -- max_len -> max_positions (the model) and max_sentence_len (training): old files still load ----------------------
def test_an_old_config_json_with_max_len_loads_as_max_positions(tmp_path):
    old = ModelConfig.preset("tiny").to_dict()
    old["max_len"] = old.pop("max_positions") + 6
    (tmp_path / "config.json").write_text(json.dumps(old))
    assert ModelConfig.load(tmp_path / "config.json").max_positions == 262
    old["max_positions"] = 100
    (tmp_path / "config.json").write_text(json.dumps(old))
    with pytest.raises(ConfigError, match="disagrees"):
        ModelConfig.load(tmp_path / "config.json")


def test_an_old_train_config_json_with_max_len_loads_as_max_sentence_len(tmp_path):
    old = TrainConfig().to_dict()
    del old["max_sentence_len"]
    old.update(max_len=64, model={"max_len": 96, "d_model": 64})
    (tmp_path / "train_config.json").write_text(json.dumps(old))
    cfg = TrainConfig.load(tmp_path / "train_config.json")
    assert cfg.max_sentence_len == 64 and cfg.model == {"max_positions": 96, "d_model": 64}


def test_an_old_config_file_given_to_train_is_read_with_the_new_names(tmp_path):
    from scratchformer.training.launch import read_config_file

    (tmp_path / "old.json").write_text(json.dumps({"max_len": 40, "warmup": 5}))
    assert read_config_file(str(tmp_path / "old.json")) == {"max_sentence_len": 40, "warmup": 5}


def test_the_shipped_run_keeps_its_old_files_and_loads():
    from pathlib import Path

    run = Path(__file__).resolve().parents[2] / "models" / "en-zh"
    assert "max_len" in json.loads((run / "config.json").read_text())  # written before the rename
    assert ModelConfig.load(run / "config.json").max_positions == 256
    assert TrainConfig.load(run / "train_config.json").max_sentence_len == 128


# -- the count --------------------------------------------------------------------------------------------------------
def _flag_counts() -> dict[str, list[str]]:
    """Per command, its --flags (the first spelling of each option, --help left out, --lang counted)."""
    return {name: [a.option_strings[0] for a in sub._actions if a.option_strings
                   and a.option_strings[0].startswith("--") and a.option_strings[0] != "--help"]
            for name, sub in _commands().items()}


def test_the_commands_outside_decoding_hold_at_most_their_share():
    """train, generate, chat, plot, shapes, params, lab, average, consolidate, export: half of the target at most
    (translate, evaluate, report and serve hold the other half)."""
    counts = _flag_counts()
    ours = sum(len(v) for k, v in counts.items() if k not in ("translate", "evaluate", "report", "serve"))
    assert ours <= MOST_FLAGS // 2, {k: len(v) for k, v in counts.items()}


def test_the_whole_cli_holds_at_most_130_flags():
    counts = _flag_counts()
    assert sum(len(v) for v in counts.values()) <= MOST_FLAGS, {k: len(v) for k, v in counts.items()}

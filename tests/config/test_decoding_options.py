"""Decoding options on the command line (issue 43): the everyday flags stay flags, every other option is a key of
`--set KEY=VALUE`, a flag that went away is one line naming its replacement; and old decoding.json files still
load (`max_len` is max_output_len, `"int8": true` is dtype int8)."""

from __future__ import annotations

import json
import shutil

import pytest

from scratchformer.cli import main
from scratchformer.config.decoding import DecodingOptions
from scratchformer.config.decoding_flags import FLAGS, parse_sets
from scratchformer.errors import ConfigError
from scratchformer.runs import load_decoding, load_run

COMMANDS = {"translate": ["x"], "evaluate": [], "report": ["--out", "r.html"], "serve": []}
SERVE_LIMITS = ["--max-beam", "--batch-wait-ms", "--max-batch-tokens", "--max-chars", "--max-sentences", "--timeout",
                "--max-cost", "--header-timeout", "--body-timeout", "--keep-alive-timeout", "--max-connections"]


def retired(command: str) -> list[tuple[str, str]]:
    """(flag, the replacement its line must name) of every decoding flag `command` no longer takes."""
    out = [("--max-len", "--set max_output_len="), ("--int8", "--dtype int8"), ("--no-int8", "--dtype fp32")]
    for f in FLAGS:
        if command in f.commands and not f.flag:
            flag = "--" + f.name.replace("_", "-")
            out += [(flag, f"--set {f.name}=true"), ("--no-" + flag[2:], f"--set {f.name}=false")] \
                if f.metavar == "BOOL" else [(flag, f"--set {f.name}=")]
    if command == "serve":
        out += [(flag, f"--set {flag[2:].replace('-', '_')}=") for flag in SERVE_LIMITS]
        out += [("--max-tokens", "--set max_batch_tokens=")]
    return out


CASES = [(command, flag, replacement) for command in COMMANDS for flag, replacement in retired(command)]


@pytest.mark.parametrize("command, flag, replacement", CASES, ids=[f"{c} {f}" for c, f, _ in CASES])
def test_each_retired_flag_is_one_line_naming_its_replacement(capsys, tiny_run, command, flag, replacement):
    with pytest.raises(SystemExit) as e:
        main([command, str(tiny_run), *COMMANDS[command], flag, "1.0"])
    err = capsys.readouterr().err
    assert e.value.code == 2 and err.count("\n") == 1, err
    assert err.startswith(f"scratchformer {command}: error: {flag} is gone: use {replacement}"), err


def test_the_torch_int8_flag_names_both_ways_out(capsys, tiny_run):
    with pytest.raises(SystemExit):
        main(["translate", str(tiny_run), "--int8", "x"])
    err = capsys.readouterr().err
    assert "--dtype int8 with --engine ctranslate2" in err and "--dtype bf16" in err


@pytest.mark.parametrize("item, words", [
    ("nope=1", "--set nope=1: give KEY=VALUE with one of the keys alpha, max_output_len, max_tokens, "
               "no_repeat_ngram, repetition_penalty, split_sentences, repair_copies"),
    ("alpha", "--set alpha: give KEY=VALUE"),
    ("beam=2", "--set beam=2: give KEY=VALUE"),  # an everyday flag is a flag, never a key
    ("alpha=high", "--set alpha=high: alpha takes a number (the keys: alpha, max_output_len"),
    ("max_output_len=1.5", "--set max_output_len=1.5: max_output_len takes a whole number or none"),
    ("split_sentences=maybe", "--set split_sentences=maybe: split_sentences takes true or false"),
])
def test_set_an_unknown_key_or_a_bad_value_is_one_line_listing_the_keys(capsys, tiny_run, item, words):
    assert main(["translate", str(tiny_run), "--set", item, "x"]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err, err


def test_set_values_are_typed_by_the_field_and_reach_the_options(tiny_run):
    got = parse_sets(["alpha=1", "max_output_len=7", "split_sentences=yes", "repair-copies=off", "max_tokens=none"],
                     "translate")
    assert got == {"alpha": 1.0, "max_output_len": 7, "split_sentences": True, "repair_copies": False,
                   "max_tokens": None}
    assert type(got["alpha"]) is float
    with pytest.raises(ConfigError, match="--set max_tokens=1: give KEY=VALUE"):
        parse_sets(["max_tokens=1"], "serve")  # serve's batch budget is max_batch_tokens
    assert parse_sets(["max_beam=8", "timeout=2.5"], "serve", {"max_beam": (int, 16, ""), "timeout": (float, 60, "")}) \
        == {"max_beam": 8, "timeout": 2.5}


def test_set_is_laid_over_the_run_and_named_as_given(capsys, tiny_run):
    """--set alpha=-1 is named so in its message, as the flag --beam 0 is (`named`)."""
    assert main(["translate", str(tiny_run), "--set", "alpha=-1", "x"]) == 2
    assert "--set alpha=-1.0: the length penalty's exponent must be in" in capsys.readouterr().err
    assert main(["translate", str(tiny_run), "--set", "max_output_len=1", "--beam", "1", "x"]) == 0
    assert len(load_run(tiny_run).tgt_tok.encode(capsys.readouterr().out.strip())) <= 1


def test_help_lists_the_set_keys_with_meaning_and_default(capsys):
    with pytest.raises(SystemExit):
        main(["serve", "--help"])
    out = " ".join(capsys.readouterr().out.split())
    assert "--set KEY=VALUE" in out and "alpha: GNMT length penalty" in out and "else 0.6)" in out
    assert "max_beam: the widest beam a request may ask for (default 16)" in out
    assert "--alpha" not in out and "--max-beam" not in out and "--int8" not in out


@pytest.fixture
def own_run(tiny_run, tmp_path):
    return shutil.copytree(tiny_run, tmp_path / "run")


def test_an_old_decoding_json_with_max_len_and_int8_loads(own_run):
    (own_run / "decoding.json").write_text(json.dumps({"alpha": 1.0, "max_len": 7, "int8": True}))
    loaded = load_decoding(own_run)
    assert (loaded.alpha, loaded.max_output_len, loaded.dtype) == (1.0, 7, "int8")
    (own_run / "decoding.json").write_text(json.dumps({"max_len": None, "int8": False, "dtype": "bf16"}))
    assert load_decoding(own_run) == DecodingOptions(dtype="bf16")  # int8 false said nothing
    (own_run / "decoding.json").write_text(json.dumps({"max_len": 5, "max_output_len": 6}))
    with pytest.raises(ConfigError, match="decoding.json: max_len and max_output_len: the same option"):
        load_decoding(own_run)
    saved = json.loads(json.dumps(DecodingOptions(max_output_len=3, dtype="int8").to_dict()))
    assert "max_len" not in saved and "int8" not in saved and "named_as" not in saved


def test_choices_are_checked_where_the_options_are_made():
    for field, bad in (("engine", "tensorrt"), ("step", "fast"), ("dtype", "fp16")):
        with pytest.raises(ConfigError, match=f"^{field}={bad}: must be one of "):
            DecodingOptions(**{field: bad})
    with pytest.raises(ConfigError, match="^--dtype fp16: must be one of auto, fp32, bf16, int8$"):
        DecodingOptions().pick(named_as=True, dtype="fp16")

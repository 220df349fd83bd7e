"""Under LANG=zh_CN.UTF-8 the tools speak Chinese all the way (issue 44): every command's --help, a set of
representative errors and the train / evaluate / export progress and summary lines hold no English sentence. An
English sentence is a run of 3 or more English words outside code: `backticks`, flags (--beam, -h), paths, file
names, KEY=VALUE, {json}, UPPERCASE metavars and the allowlisted proper names are taken out first."""

from __future__ import annotations

import re

import pytest

from scratchformer import i18n
from scratchformer.cli import COMMAND_MODULES, build_parser, main

COMMANDS = [m.removesuffix("_cmd") for m in COMMAND_MODULES]
# proper names and code words that may stand side by side in Chinese text
ALLOWED = ["Hugging Face", "Authorization: Bearer KEY", "sacreBLEU", "LibreTranslate", "CTranslate2", "DNS",
           "headless chromium", "Noam", "GNMT", "Linear", "AOTInductor", "PyTorch", "safetensors", "Llama",
           "greedy BLEU", "BLEU", "chrF", "ONNX", "Keras"]
CODE = [r"`[^`]*`", r"\{[^{}]*\}", r"\[[^\[\]]*\]", r"(?<!\w)--?[\w-]+", r"\S*[/\\]\S*", r"\S+\.(?:\w{1,12})\b",
        r"\S+=\S*", r"\b[A-Z][A-Z0-9_]+\b", r"'[^']*'", r'"[^"]*"']
SENTENCE = re.compile(r"\b[A-Za-z]{2,}(?: [A-Za-z]{2,}){2,}\b")  # a comma-separated list of names is not one


def english_sentences(text: str) -> list[str]:
    """The runs of >= 3 English words in `text` once code, flags, paths and allowlisted names are taken out."""
    for name in ALLOWED:
        text = text.replace(name, " ")
    for pattern in CODE:
        text = re.sub(pattern, " ", text)
    return [m.group(0) for m in SENTENCE.finditer(text)]


def test_the_heuristic_finds_an_english_sentence_and_spares_code():
    assert english_sentences("prints the summary") == ["prints the summary"]
    assert english_sentences("训练 --max-steps 5 --recipe toy，写到 runs/toy/model.safetensors") == []
    assert english_sentences("用法：scratchformer train [-h] [--out OUT] KEY=VALUE `a<TAB>b` {\"src\": ...}") == []


@pytest.fixture
def chinese(monkeypatch):
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    i18n.set_language(None)
    yield
    i18n.set_language("en")


def test_the_command_list_is_every_command():
    assert set(COMMANDS) == set(build_parser()._subparsers._group_actions[0].choices)


@pytest.mark.parametrize("command", COMMANDS)
def test_help_is_chinese(command, chinese, capsys):
    with pytest.raises(SystemExit) as stop:
        main([command, "--help"])
    assert stop.value.code == 0
    out = capsys.readouterr().out
    assert out.startswith("用法：")
    assert not english_sentences(out), f"{command} --help in English: {english_sentences(out)}"


@pytest.mark.parametrize("argv", [
    ["translate", "no/such/run", "hello"],
    ["params", "--preset", "nope"],
    ["params", "--preset", "tiny", "d_model=30", "n_heads=4"],
    ["params", "--preset", "tiny", "d_model"],
    ["params", "--preset", "tiny", "no_such_field=1"],
    ["params", "--preset", "tiny", "norm_placement=mid"],
    ["evaluate", "models/en-zh", "--limit", "0"],
    ["translate", "models/en-zh", "--file", "no/such/file.txt", "hello"],
    ["translate", "models/en-zh", "--file", "no/such/file.txt"],
    ["train", "--max-steps", "many"],
    ["train", "--no-such-flag"],
    ["evaluate"],
])
def test_errors_are_chinese(argv, chinese, capsys):
    try:
        code = main(argv)
    except SystemExit as e:  # argparse's own errors
        code = e.code
    assert code == 2
    err = capsys.readouterr().err.strip()
    assert "错误：" in err and "error:" not in err, err
    assert not english_sentences(err), f"{argv}: English in {err!r}"


def test_folder_and_range_errors_are_chinese(chinese, capsys, tmp_path):
    """The errors of runs/folders.py (an output that exists) and of TrainConfig's ranges, with their fields."""
    (tmp_path / "pe.png").write_bytes(b"")
    for argv in (["plot", "positions", "--out", str(tmp_path / "pe.png")],
                 ["train", "--recipe", "toy", "keep_last=0", "--out", str(tmp_path / "run")]):
        assert main(argv) == 2
        err = capsys.readouterr().err.strip()
        assert "错误：" in err and not english_sentences(err), err


def test_progress_and_summary_lines_are_chinese(chinese, capsys, tmp_path):
    import argparse

    from scratchformer.cli.export_cmd import _phase
    from scratchformer.cli.train_cmd import readable_summary, readable_test

    data = {"corpus": "toy", "splits": "held out by hash (5% each)", "train": 6, "valid": 6, "test": 6}
    summary = {"run_dir": str(tmp_path / "r"), "step": 5, "epoch": 1, "elapsed_s": 12.0, "valid_loss": 3.2,
               "valid_nll": 3.0, "valid_ppl": 20.1, "bleu": 1.5, "data": data}
    test = {"corpus": "toy", "sentences": 6, "bleu": 100.0, "chrf": 100.0,
            "samples": [{"src": "hello", "ref": "你好", "hyp": "你好"}]}
    _phase(argparse.Namespace(run_dir="runs/toy", format="onnx", out="out"))
    lines = [readable_summary(summary), readable_test(test), capsys.readouterr().err]
    for template, fields in [
        ("{task}: {examples} training examples, {params:.2f}M parameters, device {device}, world size {world} -> "
         "{run}", dict(task="translate", examples=6, params=0.17, device="cpu", world=1, run="runs/toy")),
        ("step {step}: valid loss {loss:.3f}, ppl {ppl:.1f}{bleu}", dict(step=5, loss=1.0, ppl=2.7, bleu="")),
    ]:
        lines.append(i18n._(template).format(**fields))
    for text in lines:
        assert not english_sentences(text), f"English in {text!r}"


@pytest.mark.parametrize("argv", [["params", "--preset", "paper-base"], ["params", "--preset", "gpt-tiny"],
                                  ["params", "--table3"]])
def test_the_params_table_is_chinese(argv, chinese, capsys):
    assert main(argv) == 0
    out = capsys.readouterr().out
    assert not english_sentences(out), f"{argv}: English in the table: {english_sentences(out)}"

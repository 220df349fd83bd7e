"""Choosing the language: --lang on every command, else the locale variables in gettext's order."""

from __future__ import annotations

import pytest

from scratchformer import i18n
from scratchformer.cli import build_parser, main


@pytest.fixture(autouse=True)
def english_after():
    yield
    i18n.set_language("en")


@pytest.mark.parametrize("environ, expected", [
    ({"LANG": "zh_CN.UTF-8"}, "zh"),
    ({"LANG": "en_US.UTF-8"}, "en"),
    ({"LANG": "C.UTF-8"}, "en"),
    ({}, "en"),
    ({"LC_ALL": "zh_TW.UTF-8", "LANG": "en_US.UTF-8"}, "zh"),  # LC_ALL before LANG
    ({"LC_MESSAGES": "zh_CN.UTF-8", "LANG": "C"}, "zh"),
    ({"LANGUAGE": "zh_CN:en", "LANG": "en_US.UTF-8"}, "zh"),
    ({"LANGUAGE": "fr:en", "LANG": "zh_CN.UTF-8"}, "en"),  # the list's first language we have
    ({"LANGUAGE": "fr", "LANG": "zh_CN.UTF-8"}, "zh"),  # none we have: on to LANG
])
def test_language_from_the_environment(environ, expected):
    assert i18n.language_from_env(environ) == expected


def test_chinese_and_english():
    question = "Why divide the scores by sqrt(d_k)? Without it, does softmax tend to one-hot?"
    i18n.set_language("zh")
    assert i18n._(question).startswith("为什么")
    assert i18n._("a message with no entry") == "a message with no entry"  # English, not an error
    i18n.set_language("en")
    assert i18n._(question) == question
    with pytest.raises(ValueError, match="--lang fr"):
        i18n.set_language("fr")


def test_every_command_takes_lang():
    parser = build_parser()
    commands = parser._subparsers._group_actions[0].choices
    for name, sub in commands.items():
        assert any("--lang" in a.option_strings and a.choices == ("en", "zh") for a in sub._actions), name
    args = parser.parse_args(["lab", "--lang", "zh"])
    assert args.lang == "zh"


def test_lab_list_in_chinese_from_lang_and_from_the_locale(capsys, monkeypatch):
    assert main(["lab", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "没有位置编码，注意力能看出词元的顺序吗？" in out and "Without positional" not in out
    monkeypatch.setenv("LANG", "zh_CN.UTF-8")
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES"):
        monkeypatch.delenv(name, raising=False)
    assert main(["lab"]) == 0
    assert "没有位置编码" in capsys.readouterr().out
    assert main(["lab", "--lang=en"]) == 0  # the flag wins over the locale
    assert "Without positional encoding" in capsys.readouterr().out


def test_help_lists_the_commands_in_chinese(capsys):
    with pytest.raises(SystemExit):
        main(["--lang", "zh", "--help"])
    out = capsys.readouterr().out
    assert "手写的 Transformer" in out and "一次前向传播" in out


def test_pad_counts_wide_characters_twice():
    assert i18n.width("词元ab") == 6
    assert i18n.pad("词元", 6) == "词元  " and i18n.pad("ab", 4, right=True) == "  ab"

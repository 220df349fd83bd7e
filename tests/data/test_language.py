"""Wrong-language input: a mostly-CJK sentence given to an en->zh model is named in one line (seed 002's
"我 爱 中国" is the case the reviewer met); English input, mixed input and pairs we do not know stay silent."""

from __future__ import annotations

import warnings

import pytest

from scratchformer.data.language import LanguageWarning, cjk_share, looks_like, warn_wrong_language, wrong_language


def test_cjk_share_counts_letters_only():
    assert cjk_share("我 爱 中国") == 1.0
    assert cjk_share("Click OK.") == 0.0
    assert cjk_share("打开 GIMP") == pytest.approx(1 / 3)  # 2 Han of 6 letters; spaces do not count
    assert cjk_share("123 ...") is None


@pytest.mark.parametrize("text, lang, expected", [
    ("我 爱 中国", "en", False), ("我 爱 中国", "zh", True), ("Creates a new text document.", "en", True),
    ("Creates a new text document.", "zh", False), ("点击 Save 保存文件", "zh", True), ("42", "en", None),
    ("是", "en", None), ("こんにちは世界", "ja", True), ("Bonjour", "fr", True),
])
def test_looks_like(text, lang, expected):
    assert looks_like(text, lang) is expected


def test_one_line_for_chinese_given_to_an_en_zh_model():
    line = wrong_language(["我 爱 中国"], "software")
    assert line is not None and "\n" not in line
    assert "mostly CJK" in line and "en->zh" in line and "give en text" in line
    several = wrong_language(["Click OK.", "我 爱 中国", "保存"], "en-zh")
    assert several.startswith("2 of 3 inputs (first: #2)")
    assert wrong_language(["Creates a new text document.", "Open GIMP"], "software") is None
    assert wrong_language(["我 爱 中国"], "my-own.tsv") is None  # an unknown pair: no guess
    assert wrong_language(["Creates a new document."], "zh-en") is not None  # the other direction too


def test_the_warning_is_a_language_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_wrong_language(["我 爱 中国"], "en-zh")
        warn_wrong_language(["I love China"], "en-zh")
    assert [w.category for w in caught] == [LanguageWarning]


def test_translate_and_plot_attention_warn_in_one_line(tmp_path, capsys):
    """Through the CLI, on the shipped en->zh model: stderr has the one warning line, and the command still runs."""
    from pathlib import Path

    from scratchformer.cli import main

    run = Path(__file__).resolve().parents[2] / "models" / "en-zh"
    if not (run / "model.safetensors").is_file():
        pytest.skip("the shipped model is not in this checkout")
    assert main(["translate", str(run), "--beam", "1", "我 爱 中国"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scratchformer translate: warning: the input is mostly CJK")
    assert main(["plot", "attention", str(run), "我 爱 中国", "--out", str(tmp_path / "a.png"), "--layer", "1",
                 "--head", "1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "mostly CJK" in err[0] and err[0].startswith("scratchformer plot: warning:")
    assert main(["translate", str(run), "--beam", "1", "Click OK."]) == 0
    assert capsys.readouterr().err == ""

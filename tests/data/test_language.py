"""Wrong-language input: a sentence in another language than the model's source is named in one line, with the
language the detector found, in the user's language (seed 002's "我 爱 中国" and issue 44's "Bonjour" are the cases
reviewers met); English input, mixed input, short input and pairs we do not know stay silent."""

from __future__ import annotations

import warnings

import pytest

from scratchformer.data.language import (
    LanguageWarning,
    cjk_share,
    detect,
    looks_like,
    warn_wrong_language,
    wrong_language,
)
from scratchformer.i18n import set_language


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


@pytest.mark.parametrize("text, code", [
    ("Hello world", "en"), ("Open the file in a new window.", "en"), ("Bonjour le monde", "fr"),
    ("Voulez-vous enregistrer les modifications ?", "fr"), ("我 爱 中国", "zh"), ("保存", "zh"),
    ("こんにちは世界", "ja"), ("안녕하세요", "ko"), ("Привет, мир", "ru"), ("Guten Tag, wie geht es Ihnen?", "de"),
])
def test_detect_names_the_language_with_a_confidence(text, code):
    found, confidence = detect(text)
    assert found == code and 0.0 < confidence <= 1.0
    assert detect("42") == (None, 0.0) and detect("是") == (None, 0.0)  # too few letters to tell


def test_one_line_naming_the_language():
    set_language("en")
    line = wrong_language(["我 爱 中国"], "software")
    assert line is not None and "\n" not in line
    assert line.startswith("the input looks like Chinese") and "en->zh" in line and "give English text" in line
    assert wrong_language(["Bonjour le monde"], "en-zh").startswith("the input looks like French")
    several = wrong_language(["Click OK.", "我 爱 中国", "保存"], "en-zh")
    assert several.startswith("2 of 3 inputs are not English (first: #2, which looks like Chinese)")
    assert wrong_language(["Creates a new text document.", "Open GIMP"], "software") is None
    assert wrong_language(["我 爱 中国"], "my-own.tsv") is None  # an unknown pair: no guess
    assert wrong_language(["Creates a new document."], "zh-en").startswith("the input looks like English")
    set_language("zh")
    try:
        line = wrong_language(["Bonjour le monde"], "en-zh")
        assert line.startswith("输入看起来是法语") and "请给英语文本" in line
    finally:
        set_language(None)  # the environment's choice again


def test_the_warning_is_a_language_warning():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        warn_wrong_language(["我 爱 中国"], "en-zh")
        warn_wrong_language(["I love China"], "en-zh")
    assert [w.category for w in caught] == [LanguageWarning]


def test_translate_and_plot_attention_warn_in_one_line(tmp_path, capsys):
    """Through the CLI, on the shipped en->zh model: stderr has the one warning line naming the language (in the
    user's language), and the command still runs; English gets no warning."""
    from pathlib import Path

    from scratchformer.cli import main

    run = Path(__file__).resolve().parents[2] / "models" / "en-zh"
    if not (run / "model.safetensors").is_file():
        pytest.skip("the shipped model is not in this checkout")
    assert main(["translate", str(run), "--beam", "1", "我 爱 中国"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and err[0].startswith("scratchformer translate: warning: the input looks like Chinese")
    assert main(["translate", str(run), "--beam", "1", "Bonjour, je voudrais ouvrir ce fichier."]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "the input looks like French" in err[0] and "give English text" in err[0]
    assert main(["translate", str(run), "--lang", "zh", "--beam", "1", "Bonjour, je voudrais ouvrir ce fichier."]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "输入看起来是法语" in err[0], err
    assert main(["plot", "attention", str(run), "我 爱 中国", "--out", str(tmp_path / "a.png"), "--layer", "1",
                 "--head", "1"]) == 0
    err = capsys.readouterr().err.strip().splitlines()
    assert len(err) == 1 and "looks like Chinese" in err[0] and err[0].startswith("scratchformer plot: warning:")
    for english in ("Click OK.", "Open the file in a new window.", "Hello world"):
        assert main(["translate", str(run), "--beam", "1", english]) == 0
        assert capsys.readouterr().err == ""

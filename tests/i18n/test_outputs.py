"""The tools' output in Chinese: `evaluate --explain`'s text, the `params` and `shapes` headers, the plots' labels,
each with the same figures as in English."""

from __future__ import annotations

import pytest

from scratchformer import i18n
from scratchformer.cli import main
from scratchformer.evaluation.metrics import bleu_explained, format_bleu_explained


@pytest.fixture(autouse=True)
def english_after():
    yield
    i18n.set_language("en")


def test_explain_in_chinese_keeps_every_figure():
    e = bleu_explained(["猫坐在垫子上", "今天天气很好"], ["猫坐在垫子上。", "今天的天气很好。"])
    english = format_bleu_explained(e)
    i18n.set_language("zh")
    chinese = format_bleu_explained(e)
    assert "简短惩罚" in chinese and "几何平均" in chinese and "brevity penalty:" not in chinese
    for figure in (f"{e['score']:.2f}", f"{e['simple_bleu']:.2f}", f"{e['brevity_penalty']:.4f}", "tok:zh"):
        assert figure in english and figure in chinese
    assert len(chinese.splitlines()) == len(english.splitlines())


def test_params_and_shapes_headers_in_chinese(capsys):
    assert main(["params", "--preset", "paper-base", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert "组件" in out and "每层" in out and "合计（精确）" in out and "component" not in out
    header = next(line for line in out.splitlines() if "组件" in line)
    assert i18n.width(header[: header.index("每层") + 2]) == 44 + 1 + 12  # columns line up: Chinese counts double
    assert main(["shapes", "--preset", "paper-base", "--lang", "zh"]) == 0
    out = capsys.readouterr().out
    assert out.startswith("维度：") and "输入：" in out


def test_plot_labels_in_chinese(monkeypatch, tmp_path):
    from scratchformer.inspect import plots

    texts = []
    real = plots._save

    def keep(fig, path, name):
        texts.extend(t for ax in fig.axes for t in (ax.get_title(), ax.get_xlabel(), ax.get_ylabel()))
        return real(fig, path, name)

    monkeypatch.setattr(plots, "_save", keep)
    i18n.set_language("zh")
    plots.plot_positions(tmp_path / "pe.png", d_model=16, max_len=20)
    assert "位置" in texts and "嵌入维度" in texts and "正弦位置编码（d_model=16）" in texts

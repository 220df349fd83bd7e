"""Chinese labels are drawn with a real Chinese font: no "Glyph ... missing from font(s)" at draw time."""

import io
import os
import subprocess
import sys
import warnings
from pathlib import Path

import matplotlib.pyplot as plt
import pytest
import torch

from scratchformer.inspect import fonts
from scratchformer.inspect.plots import plot_attention

ROOT = Path(__file__).resolve().parents[2]
ZH = ["点", "击", "「", "边", "框", "」", "选", "项", "卡", "。", "</s>"]


def _glyph_warnings(caught) -> list[str]:
    return [str(w.message) for w in caught if "missing from font" in str(w.message)]


def test_the_dependency_provides_a_simplified_chinese_font():
    from matplotlib.ft2font import FT2Font

    name = fonts.chinese_font()
    assert name == "Noto Sans SC"  # from pylopdf-fonts-zh-cn, a dependency in pyproject.toml
    charmap = FT2Font(str(fonts._packaged_font_files()[0])).get_charmap()
    assert all(ord(ch) in charmap for ch in "".join(ZH[:-1]) + "你好世界简体中文")


def test_a_figure_with_chinese_labels_draws_without_missing_glyphs():
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        with fonts.chinese_text():
            fig, ax = plt.subplots()
            ax.set_title("单击「边框」选项卡 (Click the Borders tab)")
            ax.set_xticks(range(len(ZH)), ZH)
            fig.savefig(io.BytesIO(), format="png")  # the glyph warnings come at draw time
            plt.close(fig)
    assert _glyph_warnings(caught) == []


def test_the_attention_heatmap_draws_chinese_tokens(tmp_path):
    weights = torch.rand(2, len(ZH), 5).softmax(-1)  # (h, L_tgt, L_src)
    with warnings.catch_warnings(record=True) as caught:
        warnings.simplefilter("always")
        path = plot_attention(tmp_path / "a.png", weights, ["Click", "the", "Borders", "tab", "</s>"], ZH)
    assert path.read_bytes()[:4] == b"\x89PNG"
    assert _glyph_warnings(caught) == []


def test_without_any_chinese_font_one_warning_names_the_package(tmp_path, monkeypatch):
    monkeypatch.setattr(fonts, "_packaged_font_files", lambda: [])
    monkeypatch.setattr(fonts, "_SYSTEM_FAMILIES", ())
    fonts.chinese_font.cache_clear()
    try:
        with warnings.catch_warnings(record=True) as caught:
            warnings.simplefilter("always")
            for name in ("a.png", "b.png"):  # two pictures, still one warning
                plot_attention(tmp_path / name, torch.rand(len(ZH), 3), ["a", "b", "</s>"], ZH)
        assert (tmp_path / "a.png").is_file() and (tmp_path / "b.png").is_file()
        ours = [str(w.message) for w in caught if issubclass(w.category, fonts.MissingFontWarning)]
        assert len(ours) == 1 and f"pip install {fonts.PACKAGE}" in ours[0]
        assert len(caught) == 1, [str(w.message) for w in caught]  # the per-glyph warnings are not repeated
    finally:
        fonts.chinese_font.cache_clear()


@pytest.mark.skipif(not (ROOT / "models" / "en-zh" / "model.safetensors").is_file(), reason="no shipped model")
def test_show_attention_of_the_shipped_en_zh_model_has_no_missing_glyphs(tmp_path):
    env = {**os.environ, "PYTHONPATH": str(ROOT / "src"), "OMP_NUM_THREADS": "1"}
    out = tmp_path / "out.png"
    proc = subprocess.run([sys.executable, "-m", "scratchformer", "translate", str(ROOT / "models" / "en-zh"),
                           "--beam", "1", "--show-attention", str(out), "Click the Borders tab."],
                          env=env, capture_output=True, text=True, timeout=300)
    assert proc.returncode == 0, proc.stderr[-2000:]
    assert any("\u4e00" <= ch <= "\u9fff" for ch in proc.stdout), proc.stdout  # it did translate into Chinese
    assert "missing from font" not in proc.stderr and "Glyph" not in proc.stderr, proc.stderr[-2000:]
    assert out.read_bytes()[:4] == b"\x89PNG"

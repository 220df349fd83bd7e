"""The report renders Chinese anywhere: in Chinese (--lang zh), with a subset of the packaged font embedded as an
@font-face data URI that covers every character of the page above ASCII, curves with validation beside
training, and each score's split and sentence count; and a real browser draws real glyphs with it on a machine
that has no CJK font of its own."""

from __future__ import annotations

import base64
import io
import re
import shutil
import subprocess

import pytest

from scratchformer import i18n
from scratchformer.cli import main
from scratchformer.inspect import browser
from scratchformer.inspect.fonts import EMBEDDED_FAMILY, font_face_css, subset_font


@pytest.fixture(scope="module")
def zh_page(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("page-zh") / "report.html"
    try:
        assert main(["report", str(tiny_run), "--out", str(out), "--samples", "1", "--lang", "zh"]) == 0
    finally:
        i18n.set_language("en")
    return out


def embedded_cmap(text: str) -> set[int]:
    from fontTools.ttLib import TTFont

    found = re.search(rf'font-family: "{EMBEDDED_FAMILY}";[^}}]*base64,([A-Za-z0-9+/=]+)', text)
    assert found, "no embedded @font-face in the page"
    return set(TTFont(io.BytesIO(base64.b64decode(found[1]))).getBestCmap())


def test_the_page_is_chinese_and_its_font_covers_every_character(zh_page):
    text = zh_page.read_text(encoding="utf-8")
    assert '<html lang="zh-CN">' in text and "测试分数" in text and "训练与验证曲线" in text
    visible = re.sub(r"data:[^\"')]+", "", text)
    wide = {ord(c) for c in visible if ord(c) > 0x7F}
    assert wide and wide <= embedded_cmap(text)
    assert f'font-family: "{EMBEDDED_FAMILY}", sans-serif' in text  # the subset first, Latin from sans-serif


def test_the_subset_is_small_and_exact():
    data = subset_font("词元掩码")
    from fontTools.ttLib import TTFont

    assert set(TTFont(io.BytesIO(data)).getBestCmap()) == {ord(c) for c in "词元掩码"}
    assert len(data) < 20_000  # four glyphs, not the whole font's megabytes
    assert font_face_css("abc").startswith("@font-face")  # a page with no Chinese still gets a valid rule


def test_each_score_says_its_split_and_sentences(zh_page):
    text = zh_page.read_text(encoding="utf-8")
    assert "<th>数据划分</th><th>句子数</th>" in text
    # measured now with the run's own decoding (its decoding.json: beam 4 when the file says nothing)
    assert re.search(r"<td>(greedy|beam \d+)</td><td>test</td><td class=\"num\">\d+</td>", text)


def test_the_curves_draw_validation_beside_training(monkeypatch, tmp_path):
    from scratchformer.inspect import plots

    labels = []
    real = plots._save

    def keep(fig, path, name):
        labels.extend(line.get_label() for ax in fig.axes for line in ax.get_lines())
        return real(fig, path, name)

    monkeypatch.setattr(plots, "_save", keep)
    base = [{"kind": "train", "step": s, "loss": 5.0 - s / 100} for s in range(1, 101)] + [
        {"kind": "valid", "step": 50, "valid_loss": 4.0}, {"kind": "valid", "step": 100, "valid_loss": 3.5}]
    tuned = [{"kind": "train", "step": s, "loss": 3.0} for s in range(1, 21)]
    plots.plot_curves(tmp_path / "c.png", tuned, earlier=base)
    assert "phase 1: validation loss" in labels and "phase 2: train loss" in labels
    assert "phase 1: train loss, running mean" in labels


def _no_system_cjk_font() -> str | None:
    """Why this machine cannot show the point of the test (it has a CJK font), or None."""
    if shutil.which("fc-list") is None:
        return "fc-list is missing: cannot tell whether the system has a CJK font"
    fonts = subprocess.run(["fc-list", ":lang=zh"], capture_output=True, text=True, check=False).stdout.strip()
    return f"this system has CJK fonts ({fonts.splitlines()[0]}): the test needs none" if fonts else None


DRAW = """
const [family, chars, done] = arguments;
document.fonts.load('32px "' + family + '"', chars).then(() => {
  const canvas = document.createElement('canvas'); canvas.width = 40; canvas.height = 40;
  const ctx = canvas.getContext('2d');
  const pixels = (font, c) => { ctx.clearRect(0, 0, 40, 40); ctx.font = font; ctx.fillText(c, 2, 34);
                                return Array.from(ctx.getImageData(0, 0, 40, 40).data).join(','); };
  done({embedded: Array.from(chars).map(c => pixels('32px "' + family + '"', c)),
        fallback: Array.from(chars).map(c => pixels('32px sans-serif', c)),
        status: document.fonts.status});
});
"""


@pytest.mark.skipif(browser.missing() is not None, reason=f"no headless browser here: {browser.missing()}")
@pytest.mark.skipif(_no_system_cjk_font() is not None, reason=str(_no_system_cjk_font()))
def test_chinese_renders_as_glyphs_not_boxes_without_a_system_cjk_font(zh_page, tmp_path):
    """`fc-list :lang=zh` is empty here (checked above): without the embedded font every Chinese character falls
    back to the same empty box. With it, two different characters draw two different glyphs."""
    with browser.chromium(800, 600) as driver:
        driver.get(zh_page.resolve().as_uri())
        drawn = driver.execute_async_script(DRAW, EMBEDDED_FAMILY, "测试")
        assert driver.execute_script("return document.documentElement.lang") == "zh-CN"
    assert drawn["status"] == "loaded"
    first, second = drawn["embedded"]
    assert first != second  # real glyphs: each character its own shape
    assert drawn["fallback"][0] == drawn["fallback"][1]  # no CJK font: both are the same box
    assert drawn["embedded"] != drawn["fallback"]

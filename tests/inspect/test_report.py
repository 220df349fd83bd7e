"""The run report is one self-contained page: every section, every picture inline (decodable PNGs), no address
outside the file, the figures it quotes equal to what the metrics compute; and a real browser renders it."""

import base64
import json
import re
import shutil

import pytest

from scratchformer.cli import main
from scratchformer.data.corpus import load_pairs
from scratchformer.evaluation.metrics import sentence_chrf
from scratchformer.evaluation.report import report_figures, stored_scores
from scratchformer.inspect import browser
from scratchformer.inspect.attention import KINDS
from scratchformer.inspect.report import SECTIONS
from scratchformer.runs import load_run


@pytest.fixture(scope="module")
def page(tiny_run, tmp_path_factory):
    out = tmp_path_factory.mktemp("page") / "report.html"
    assert main(["report", str(tiny_run), "--out", str(out), "--samples", "1"]) == 0
    return out


def test_the_page_is_self_contained(page):
    text = page.read_text(encoding="utf-8")
    assert "<script" not in text.lower()
    addresses = re.findall(r'(?:src|href)="([^"]*)"', text)
    assert addresses and all(a.startswith(("data:", "#")) for a in addresses)  # nothing to fetch, anywhere
    images = re.findall(r'src="data:image/png;base64,([^"]+)"', text)
    assert len(images) == 1 + len(KINDS)  # positions + 1 sentence x 3 kinds (no metrics.jsonl: no curves)
    assert all(base64.b64decode(i)[:4] == b"\x89PNG" for i in images)
    for key, title in SECTIONS:
        assert f'<h2 id="{key}">{title}</h2>' in text


def test_the_figures_quoted_are_the_metrics(tiny_run):
    run = load_run(tiny_run)
    pairs = load_pairs("toy", "test")
    samples, scores = report_figures(run, pairs, samples=3, limit=4)
    assert [s["src"] for s in samples] == [p[0] for p in pairs[:3]]
    assert all(s["chrf"] == pytest.approx(sentence_chrf(s["hyp"], s["ref"])) for s in samples)
    assert "measured now" in scores["note"] and "first 4 of 6" in scores["note"]
    assert scores["rows"][0]["sentences"] == 4 and "tok:zh" in scores["rows"][0]["bleu_signature"]


def test_stored_test_scores_are_used_when_the_run_has_them(tiny_run, tmp_path):
    run_dir = tmp_path / "shipped"
    shutil.copytree(tiny_run, run_dir)
    (run_dir / "README.json").write_text(json.dumps({"test": {"beam4": {
        "bleu": 42.47, "chrf": 40.12, "sentences": 1000, "bleu_signature": "nrefs:1|tok:zh"}}}))
    run = load_run(run_dir)
    rows = stored_scores(run)
    assert rows[0]["setting"] == "beam 4" and rows[0]["bleu"] == 42.47 and "nc:6" in rows[0]["chrf_signature"]
    _, scores = report_figures(run, load_pairs("toy", "test"), samples=1)
    assert scores["rows"] == rows and "stored in" in scores["note"]


@pytest.mark.skipif(browser.missing() is not None, reason=f"no headless browser here: {browser.missing()}")
def test_a_real_browser_renders_it(page, tmp_path):
    from PIL import Image

    seen = browser.screenshot(page, tmp_path / "shot.png", width=1000, height=1200)
    assert seen["title"] == "scratchformer report: run"
    assert seen["images"] == 4 and seen["images_loaded"]  # every inline PNG decoded
    assert seen["console"] == []  # no error, no warning
    shot = Image.open(tmp_path / "shot.png").convert("L")
    assert shot.size == (1000, 1200)
    lo, hi = shot.getextrema()
    colours = len(shot.getcolors(maxcolors=256 * 256) or range(257))
    assert hi - lo > 100 and colours > 16  # text and pictures, not a blank page

"""Every experiment has its page in English and in Chinese, with its picture, and the page quotes the conclusion
that its committed run (docs/lab/NAME.json) printed."""

import json
import re
from pathlib import Path

import pytest

from scratchformer.lab import EXPERIMENTS

DOCS = Path(__file__).resolve().parents[2] / "docs"
CJK = re.compile(r"[\u4e00-\u9fff]")


@pytest.mark.parametrize("name", list(EXPERIMENTS))
def test_each_experiment_has_its_pages_picture_and_numbers(name):
    en, zh = (DOCS / "lab" / f"{name}.md").read_text(encoding="utf-8"), (DOCS / "zh" / "lab" / f"{name}.md").read_text(
        encoding="utf-8")
    assert (DOCS / "lab" / f"{name}.png").read_bytes()[:4] == b"\x89PNG"
    run = json.loads((DOCS / "lab" / f"{name}.json").read_text(encoding="utf-8"))
    assert run["experiment"] == name and run["quick"] is False  # the full run, not the tests' quick one
    assert f"({name}.png)" in en and f"(../../lab/{name}.png)" in zh
    assert run["conclusion"] in en and run["conclusion"] in zh
    assert len(CJK.findall(zh)) > 300  # written in Chinese, not a copy of the English page
    for page, root in ((en, DOCS / "lab"), (zh, DOCS / "zh" / "lab")):
        for target in re.findall(r"\]\(([^)#]+\.(?:py|md|png|json))(?:#L\d+)?\)", page):
            assert (root / target).exists(), f"{name}: broken link {target}"


def test_the_indexes_list_every_experiment():
    for index in (DOCS / "lab" / "README.md", DOCS / "zh" / "lab" / "README.md"):
        text = index.read_text(encoding="utf-8")
        assert all(f"[`{name}`]({name}.md)" in text for name in EXPERIMENTS), index

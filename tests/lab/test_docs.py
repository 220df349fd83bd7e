"""Every experiment has its page in English and in Chinese, with its picture, and the page quotes the conclusion
that its committed run (docs/lab/NAME.json) printed."""

import importlib
import importlib.util
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


def _lab_pages():
    spec = importlib.util.spec_from_file_location("lab_pages", DOCS.parent / "scripts" / "lab_pages.py")
    module = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(module)
    return module


def test_every_code_link_points_at_the_line_that_holds_its_snippet():
    pages = _lab_pages()
    links = sum(len(pages.LINK.findall(p.read_text(encoding="utf-8"))) for p in pages.PAGES)
    assert links >= 40  # every page links its code
    problems = [problem for page in pages.PAGES for problem in pages.refresh(page)[1]]
    assert not problems, "run python scripts/lab_pages.py: " + "; ".join(problems)


def test_a_moved_line_is_found_again(tmp_path):
    pages = _lab_pages()
    page = tmp_path / "docs" / "p.md"
    page.parent.mkdir()
    (tmp_path / "code.py").write_text("a = 1\nb = 2  # the line\n", encoding="utf-8")
    page.write_text("see [`b = 2`](../code.py#L1) (code.py, line 1) and [`gone`](../code.py#L2) (code.py, line 2)",
                    encoding="utf-8")
    text, problems = pages.refresh(page)
    assert "(../code.py#L2) (code.py, line 2) and" in text
    assert problems == ["docs/p.md: `b = 2` moved from line 1 to 2", "docs/p.md: `gone` is no longer in ../code.py"]


@pytest.mark.parametrize("name", [n for n, (run, _q) in EXPERIMENTS.items()
                                  if hasattr(importlib.import_module(run.__module__), "conclude")])
def test_the_chinese_page_quotes_the_chinese_conclusion_of_the_committed_numbers(name):
    """Experiments whose conclusion is built from the numbers alone (a `conclude` function): the Chinese page quotes
    it in Chinese, rendered from docs/lab/NAME.json, so the two pages cannot drift apart."""
    from scratchformer.i18n import language, set_language

    run = json.loads((DOCS / "lab" / f"{name}.json").read_text(encoding="utf-8"))
    conclude = importlib.import_module(EXPERIMENTS[name][0].__module__).conclude
    before = language()
    try:
        set_language("en")
        assert conclude(run["numbers"]) == run["conclusion"]  # the committed run's own conclusion, from its numbers
        set_language("zh")
        chinese = conclude(run["numbers"])
    finally:
        set_language(before)
    assert CJK.search(chinese) and chinese in (DOCS / "zh" / "lab" / f"{name}.md").read_text(encoding="utf-8")

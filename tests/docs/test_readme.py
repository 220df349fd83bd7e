"""The README stays a landing page (about 250 lines at most) and README.zh-CN.md mirrors it: the same sections, the
same rows in its tables, and a Chinese page for every manual page the English one links."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]


def sections(text: str) -> list[str]:
    return re.findall(r"^## .+$", text, re.M)


def table_rows(text: str) -> list[int]:
    """The number of body rows of each markdown table, in order."""
    counts, run = [], 0
    for line in text.splitlines() + [""]:
        if line.startswith("|"):
            run += 1
        elif run:
            counts.append(run - 2)  # header and separator
            run = 0
    return counts


def manual_pages(text: str) -> set[str]:
    """The docs pages a README links, by name: docs/X.md and docs/zh/X.md both give X.md."""
    return {m.group(2) for m in re.finditer(r"\]\(docs/(zh/)?([\w./-]+\.md)", text)}


def test_the_readme_is_a_landing_page():
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    assert len(english.splitlines()) <= 250
    assert "make demo" in english and "make test" in english and "docs/README.md" in english


def test_the_chinese_readme_mirrors_the_english_one():
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert len(sections(chinese)) >= len(sections(english)) >= 6
    assert table_rows(chinese)[: len(table_rows(english))] == table_rows(english)
    linked_in_chinese = {m.group(1) for m in re.finditer(r"\]\(docs/zh/([\w./-]+\.md)", chinese)}
    assert manual_pages(english) - {"README.md"} <= linked_in_chinese | {"lab/README.md"}


def test_table_rows_counts_each_table():
    text = "| a |\n|---|\n| 1 |\n| 2 |\n\ntext\n| b |\n|---|\n| 3 |\n"
    assert table_rows(text) == [2, 1]

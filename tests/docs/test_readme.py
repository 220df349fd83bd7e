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


def tour_commands(text: str) -> list[list[str]]:
    """The `scratchformer ...` lines of the README's tour (its first code block after '## A five-minute tour'), as
    argument lists, comments dropped."""
    import shlex

    heading = "## A five-minute tour" if "## A five-minute tour" in text else "## 五分钟导览"
    block = text.split(heading, 1)[1]
    block = block.split("```bash", 1)[1].split("```", 1)[0]
    return [shlex.split(line.split("  #", 1)[0])[1:] for line in block.splitlines()
            if line.startswith("scratchformer ")]


def test_the_tour_runs_as_written_after_make_demo(monkeypatch):
    """After `make demo`, the tour's commands work as written: the README says how to reach the `scratchformer`
    command in .venv, and the demo writes no folder the tour's `train` lines write (they would be refused as runs
    that exist)."""
    import importlib.util

    from scratchformer.cli import build_parser
    from scratchformer.training.launch import default_recipe

    spec = importlib.util.spec_from_file_location("demo", ROOT / "scripts" / "demo.py")
    demo = importlib.util.module_from_spec(spec)
    spec.loader.exec_module(demo)
    calls: list[tuple[str, ...]] = []
    monkeypatch.setattr(demo, "run", lambda *args: calls.append(args))
    monkeypatch.setattr(demo, "banner", lambda text: None)
    demo.main_demo()
    written = {Path(c[c.index("--out") + 1]) for c in calls if c[0] == "train"}
    assert len(written) == 2
    parser = build_parser()
    for name in ("README.md", "README.zh-CN.md"):
        text = (ROOT / name).read_text(encoding="utf-8")
        assert ".venv/bin/activate" in text and ".venv/bin/scratchformer" in text, name
        trains = [parser.parse_args(argv) for argv in tour_commands(text) if argv[0] == "train"]
        assert len(trains) == 2, name
        outs = {Path(a.out or f"runs/{default_recipe(a.recipe, a.config, a.resume, a.task)}") for a in trains}
        assert not outs & written, (name, outs & written)

"""The code links of the lab's pages (docs/lab, docs/zh/lab) point at lines: [`snippet`](path#L34) (file, line 34).
When the code moves, this finds each snippet's line again and rewrites the two numbers.

    python scripts/lab_pages.py           # rewrite the stale line numbers in place, say which
    python scripts/lab_pages.py --check   # only report them; exit status 1 if any is stale or lost
"""

from __future__ import annotations

import argparse
import re
import sys
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
PAGES = [*sorted((ROOT / "docs" / "lab").glob("*.md")), *sorted((ROOT / "docs" / "zh" / "lab").glob("*.md"))]
LINK = re.compile(r"\[`(?P<snippet>[^`]+)`\]\((?P<path>[^)#]+)#L(?P<line>\d+)\) \((?P<file>[\w.]+), line (?P=line)\)")


def line_of(page: Path, path: str, snippet: str) -> int | None:
    """The first line (from 1) of the linked file that holds `snippet`, or None."""
    target = (page.parent / path).resolve()
    if not target.is_file():
        return None
    lines = target.read_text(encoding="utf-8").splitlines()
    return next((i + 1 for i, text in enumerate(lines) if snippet in text), None)


def refresh(page: Path) -> tuple[str, list[str]]:
    """The page's text with every link's line number corrected, and one problem line per stale or lost link."""
    problems: list[str] = []

    def fix(m: re.Match) -> str:
        found = line_of(page, m["path"], m["snippet"])
        if found is None:
            problems.append(f"{page.parent.name}/{page.name}: `{m['snippet']}` is no longer in {m['path']}")
            return m[0]
        if found != int(m["line"]):
            problems.append(f"{page.parent.name}/{page.name}: `{m['snippet']}` moved from line {m['line']} to {found}")
        return f"[`{m['snippet']}`]({m['path']}#L{found}) ({m['file']}, line {found})"

    return LINK.sub(fix, page.read_text(encoding="utf-8")), problems


def main() -> int:
    parser = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    parser.add_argument("--check", action="store_true", help="report only; exit status 1 if a link is stale")
    args = parser.parse_args()
    all_problems = []
    for page in PAGES:
        text, problems = refresh(page)
        all_problems += problems
        if problems and not args.check:
            page.write_text(text, encoding="utf-8")
    for problem in all_problems:
        print(problem)
    lost = [p for p in all_problems if "no longer" in p]
    return 1 if (args.check and all_problems) or lost else 0


if __name__ == "__main__":
    sys.exit(main())

"""The manual holds together: every relative link and image in README.md, README.zh-CN.md, docs/**/*.md and
experiments/**/*.md points at a file that exists (for `page.md#anchor`, the file part), and every docs/X.md has its
Chinese twin docs/zh/X.md."""

from __future__ import annotations

import re
from pathlib import Path

ROOT = Path(__file__).resolve().parents[2]
DOCS = ROOT / "docs"
# [text](target) and ![alt](target); a target ends at the first space (a title) or ')'
LINK = re.compile(r"!?\[[^\]]*\]\(([^)\s]+)(?:\s+\"[^\"]*\")?\)")
FENCE = re.compile(r"^(```|~~~).*?^\1", re.M | re.S)
# English pages with no Chinese twin, and why
NO_TWIN: dict[str, str] = {}


def pages() -> list[Path]:
    return [ROOT / "README.md", ROOT / "README.zh-CN.md", *sorted(DOCS.rglob("*.md")),
            *sorted((ROOT / "experiments").rglob("*.md"))]


def links(text: str) -> list[str]:
    """The relative targets of a page's links, outside code blocks and inline code."""
    text = re.sub(r"`[^`\n]*`", "", FENCE.sub("", text))
    return [t for t in LINK.findall(text) if not re.match(r"[a-z][a-z0-9+.-]*:", t) and not t.startswith("#")]


def broken(page: Path) -> list[str]:
    out = []
    for target in links(page.read_text(encoding="utf-8")):
        path = target.split("#")[0]
        if not (page.parent / path).exists():
            out.append(f"{page.relative_to(ROOT)}: {target}")
    return out


def test_every_relative_link_resolves():
    found = pages()
    assert len(found) > 30
    problems = [line for page in found for line in broken(page)]
    assert not problems, "broken links:\n" + "\n".join(problems)


def test_every_docs_page_has_its_chinese_twin():
    english = [p.relative_to(DOCS) for p in DOCS.rglob("*.md") if p.relative_to(DOCS).parts[0] != "zh"]
    assert len(english) > 20
    missing = [str(p) for p in english
               if str(p) not in NO_TWIN and not (DOCS / "zh" / p).is_file()]
    assert not missing, f"no docs/zh/ twin for: {missing}"


def test_the_checks_find_a_broken_link_and_skip_code(tmp_path):
    page = tmp_path / "p.md"
    (tmp_path / "there.md").write_text("x")
    page.write_text("[ok](there.md#a) ![img](gone.png) [web](https://x.org) [top](#a)\n`[no](code.md)`\n"
                    "```\n[no](block.md)\n```\n[bad](missing.md#b)\n", encoding="utf-8")
    assert links(page.read_text()) == ["there.md#a", "gone.png", "missing.md#b"]
    root_relative = [line.split(": ", 1)[1] for line in broken_in(page)]
    assert root_relative == ["gone.png", "missing.md#b"]


def broken_in(page: Path) -> list[str]:
    """broken() for a page outside the repository (the test's own)."""
    return [f"{page.name}: {t}" for t in links(page.read_text(encoding="utf-8"))
            if not (page.parent / t.split("#")[0]).exists()]


def test_pyproject_names_only_files_that_exist():
    """Every file pyproject.toml's comments name (`inspect/fonts.py` in the package, `tests/conftest.py`) exists."""
    text = (ROOT / "pyproject.toml").read_text(encoding="utf-8")
    package = ROOT / "src" / "scratchformer"
    named = set(re.findall(r"\b([a-z_]+/[a-z_/]+\.py)\b", text))
    assert named and not [n for n in sorted(named) if not (package / n).is_file() and not (ROOT / n).is_file()]

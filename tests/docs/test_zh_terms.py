"""One vocabulary: the Chinese pages (docs/zh/**/*.md, README.zh-CN.md) and the catalog's Chinese entries use the
glossary's Chinese terms (docs/zh/glossary.md) in running text, not the English ones: 词元 not token, 查询 not query,
层归一化 not LayerNorm, 后归一化 not post-norm, and so on, for every row whose Chinese differs from its English.

What is not running text, and so may keep the English (the allowlist, one rule each in `running_text`):
- code: fenced blocks, `inline code` (also across lines), link targets, file names, URLs, --flags, key=value;
  the tables benchmarks/render.py renders from results.jsonl are running text like the rest (they are rendered in
  Chinese: tests/docs/test_figures.py);
- quotations: “…”, 「…」 and titles 《…》 (the seeds' words, a tool's output), blockquotes (> …), and lines with no
  Chinese at all (English quoted beside its translation);
- a gloss: the English term in brackets right after its Chinese term, 后归一化（post-norm）, as the glossary allows
  on first use;
- in the catalog, a leading name the English message starts with too, `attention：…` for "attention: …" (a command
  or choice name, which the user types as is).
tests/i18n/test_glossary.py holds the catalog to the same table the other way round (an English term in a message
needs the Chinese term in its translation)."""

from __future__ import annotations

import importlib.util
import re
from pathlib import Path

from scratchformer import i18n

ROOT = Path(__file__).resolve().parents[2]
ZH = ROOT / "docs" / "zh"
CJK = re.compile(r"[\u3400-\u9fff]")

_spec = importlib.util.spec_from_file_location("_glossary_test", ROOT / "tests" / "i18n" / "test_glossary.py")
_glossary_test = importlib.util.module_from_spec(_spec)
_spec.loader.exec_module(_glossary_test)
glossary, uses = _glossary_test.glossary, _glossary_test.uses  # one reader of the glossary's table


def terms() -> dict[str, str]:
    """English variant -> Chinese term, for the rows where the Chinese is not the English itself (softmax is)."""
    return {en: zh for en, zh in glossary().items() if en.lower() != zh.lower()}


CODE = [
    (re.compile(r"```.*?```", re.S), "\n"),  # fenced code blocks (the newlines they held are put back below)
    (re.compile(r"<!--.*?-->", re.S), " "),
    (re.compile(r"`[^`]+`"), " "),  # inline code, which may run over a line break
    (re.compile(r"\]\([^)]*\)"), "]"),  # link targets
    (re.compile(r"https?://\S+"), " "),
    (re.compile(r"[\w./-]+\.(?:md|py|json|jsonl|png|tsv|txt|toml|html|safetensors|yaml)\b"), " "),  # file names
    (re.compile(r"(?<![\w/])[\w.-]+/[\w./-]*"), " "),  # paths and folders: checkpoints/, docs/lab
    (re.compile(r"(?<![\w-])--?[A-Za-z][\w-]*"), " "),  # flags
    (re.compile(r"\b\w+=\S+"), " "),  # key=value settings
]
QUOTES = re.compile(r"“[^”\n]*”|「[^」\n]*」|《[^》\n]*》")
GLOSS = re.compile(r"[（(]([^（）()\n]*)[）)]")


def _keep_lines(match: re.Match, repl: str) -> str:
    return "\n" * match.group(0).count("\n") if repl == "\n" else re.sub(r"[^\n]+", repl, match.group(0))


def strip_glosses(line: str, table: dict[str, str]) -> str:
    """Drop a bracket that glosses the Chinese term right before it: 后归一化（post-norm）, 层归一化 (LayerNorm)."""
    def drop(m: re.Match) -> str:
        before = line[: m.start()].rstrip()[-8:]  # the words just before the bracket: 残差流（residual stream）
        inner = m.group(1)
        return " " if any(uses(inner, en) and zh in before for en, zh in table.items()) else m.group(0)
    return GLOSS.sub(drop, line)


def running_text(markdown: str, table: dict[str, str]) -> list[tuple[int, str]]:
    """(line number, text) of each line of Chinese running text, with code, quotations and glosses removed."""
    for pattern, repl in CODE:
        markdown = pattern.sub(lambda m, r=repl: _keep_lines(m, r), markdown)
    out, previous = [], ""
    for number, line in enumerate(markdown.splitlines(), 1):
        indented = line.startswith("    ") and (not previous.strip() or previous.startswith("    "))
        previous = line if (indented or not line.strip()) else line.lstrip()
        if indented or line.lstrip().startswith(">") or not CJK.search(line):
            continue  # an indented code block, a blockquote, or no Chinese on the line: not our running text
        out.append((number, strip_glosses(QUOTES.sub(" ", line), table)))
    return out


def drift(text: str, table: dict[str, str]) -> list[str]:
    return [f"{number}: {en} -> {zh}: {line.strip()[:120]}" for number, line in running_text(text, table)
            for en, zh in table.items() if uses(line, en)]


def test_the_allowlist_keeps_code_quotes_and_glosses_and_catches_running_text():
    table = {"token": "词元", "post-norm": "后归一化", "LayerNorm": "层归一化", "query": "查询"}
    page = ("每个 token 一个向量。\n"  # caught
            "后归一化（post-norm）是论文的放法，`LayerNorm(x + F(x))`，`--norm post-norm`。\n"  # gloss, code, flag
            "种子写道：“每个token都有 query”。\n"  # a quotation
            "> 程序输出：8 tokens\n"  # a blockquote
            "```\n把 query 乘以 √d_k\n```\n"  # a code block
            "Post-Norm is the paper's placement.\n"  # no Chinese on the line
            "见 [post-norm.md](lab/norm-placement.md)，再用 LayerNorm 归一化。\n")  # file name ok; LayerNorm caught
    found = drift(page, table)
    assert [f.split(":")[0] for f in found] == ["1", "9"], found
    assert "LayerNorm" in found[1]


def test_the_chinese_pages_use_the_glossarys_terms():
    table, wrong = terms(), []
    for page in [*sorted(ZH.rglob("*.md")), ROOT / "README.zh-CN.md"]:
        text = page.read_text(encoding="utf-8")
        if page.name == "glossary.md":  # the table itself pairs each English term with its Chinese one
            text = re.sub(r"^\|.*\|$", "", text, flags=re.M)
        wrong += [f"{page.relative_to(ROOT)}:{w}" for w in drift(text, table)]
    assert not wrong, "English terms in Chinese running text (use the glossary's term, or gloss it):\n" + "\n".join(
        wrong)


def catalog_drift(catalog: dict[str, str] | None = None) -> list[str]:
    """The catalog's Chinese entries (msgid -> msgstr) that use an English term of the glossary in running text."""
    table, wrong = terms(), []
    catalog = i18n.read_po(i18n.catalog_path("zh")) if catalog is None else catalog
    for msgid, msgstr in catalog.items():
        if not msgid or not msgstr:
            continue
        text = re.sub(r"\{[^}]*\}", " ", msgstr)  # placeholders are filled in by code
        name = re.match(r"([\w-]+)(?::| \()", msgid)  # "attention: ..." -> the name attention, kept as is
        if name and re.match(rf"{re.escape(name[1])}\s*[（(：:]", text):
            text = text[len(name[1]):]
        text = strip_glosses(QUOTES.sub(" ", text), table)
        for pattern, _ in CODE[2:]:
            text = pattern.sub(" ", text)
        wrong += [f"{msgid!r}: {en} -> {zh}, got {msgstr!r}" for en, zh in table.items() if uses(text, en)]
    return wrong


def test_the_catalog_check_keeps_names_and_placeholders_and_catches_running_text():
    found = catalog_drift({
        "attention: the run directory": "attention（注意力图）：运行目录",  # the choice name the user types
        "output {tokens} tokens": "输出 {tokens} 个词元",  # a placeholder is not a word
        "{n} tokens per batch": "每批 {n} 个 token",  # caught
        "post-norm, sinusoidal": "后归一化（post-norm），正弦",  # a gloss
    })
    assert len(found) == 1 and "每批" in found[0], found


def test_the_catalog_uses_the_glossarys_terms():
    wrong = catalog_drift()
    assert not wrong, "catalog entries with an English term in Chinese running text:\n" + "\n".join(wrong)


def test_the_pages_name_seed_001s_bleu_as_the_tool_prints_it():
    """`evaluate --explain --lang zh` prints 简易 BLEU; the pages say the same (简版 only as the seed's own word)."""
    catalog = i18n.read_po(i18n.catalog_path("zh"))
    printed = [s for m, s in catalog.items() if m.startswith("seed 001's simple BLEU")]
    assert printed and "简易 BLEU" in printed[0]
    for page in sorted(ZH.rglob("*.md")):
        text = QUOTES.sub(" ", page.read_text(encoding="utf-8"))
        assert "简版" not in text, page  # outside a quotation of the seed
    assert "简易 BLEU" in (ZH / "faq.md").read_text(encoding="utf-8")
    assert "简易 BLEU" in (ZH / "pictures.md").read_text(encoding="utf-8")

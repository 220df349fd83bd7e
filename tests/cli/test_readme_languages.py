"""The two languages stay in step: every command the English README documents (`scratchformer SUB`, with the
word after it where SUB takes a choice, like `plot attention`; every `make` target) appears in README.zh-CN.md."""

import re
from pathlib import Path

from scratchformer.cli import build_parser

ROOT = Path(__file__).resolve().parents[2]


def commands() -> dict[str, set[str]]:
    """Each CLI command -> the choices of its first positional argument ({} for none), from the parser itself."""
    parser = build_parser()
    subs = next(a for a in parser._actions if a.__class__.__name__ == "_SubParsersAction").choices
    out = {}
    for name, sub in subs.items():
        positional = [a for a in sub._actions if not a.option_strings and a.choices]
        out[name] = set(positional[0].choices) if positional else set()
    return out


def make_targets() -> set[str]:
    return set(re.findall(r"^([a-z][a-z-]*):", (ROOT / "Makefile").read_text(encoding="utf-8"), re.M))


def documented(text: str) -> set[str]:
    """The commands a README documents: 'scratchformer plot attention', 'scratchformer train', 'make test', ..."""
    known, found = commands(), set()
    for sub, word in re.findall(r"scratchformer ([a-z][a-z-]*)(?: +([a-z][a-z-]*))?", text):
        if sub in known:
            found.add(f"scratchformer {sub} {word}" if word in known[sub] else f"scratchformer {sub}")
    targets = make_targets()
    found |= {f"make {t}" for t in re.findall(r"\bmake ([a-z][a-z-]*)", text) if t in targets}
    return found


def missing(english: str, chinese: str) -> set[str]:
    return documented(english) - documented(chinese)


def test_every_command_of_the_english_readme_is_in_the_chinese_one():
    english = (ROOT / "README.md").read_text(encoding="utf-8")
    chinese = (ROOT / "README.zh-CN.md").read_text(encoding="utf-8")
    assert {"scratchformer train", "scratchformer report", "scratchformer plot attention", "make test"} <= (
        documented(english))
    gap = sorted(missing(english, chinese))
    assert not gap, f"in README.md but not in README.zh-CN.md: {gap}"


def test_the_check_fails_for_a_missing_command():
    english = "run `scratchformer export RUN --format onnx`, then `scratchformer plot attention R s`; make bench"
    assert missing(english, "scratchformer export 与 scratchformer plot positions") == {
        "scratchformer plot attention", "make bench"}
    assert missing("from scratchformer import ModelConfig; make another", "") == set()  # not commands
    assert "README.zh-CN.md" in (ROOT / "README.md").read_text(encoding="utf-8")  # the English one links to it


LAB = ("scaling", "positions", "heads", "complexity", "norm-placement", "add-and-norm", "layernorm-vs-batchnorm",
       "residual", "extrapolation", "label-smoothing")


def test_the_chinese_faq_answers_each_question_with_code_that_exists():
    faq = ROOT / "docs" / "zh" / "faq.md"
    text = faq.read_text(encoding="utf-8")
    parts = re.split(r"\n## Q\d+：|\n### \d\. ", text)[1:]
    assert len(parts) == 10 + 6  # seed 003's Q1-Q10 and its six Socratic questions
    for part in parts:
        links = re.findall(r"\]\((\.\./\.\./(?:src|tests)/[^)#]+)\)", part)
        assert links, f"no link to the code in: {part[:40]}"
        for link in links:
            assert (faq.parent / link).resolve().is_file(), link
    for name in LAB:  # every experiment's page is linked (the pages themselves come with `lab`)
        assert f"(lab/{name}.md)" in text and f"(docs/zh/lab/{name}.md)" in (ROOT / "README.zh-CN.md").read_text(
            encoding="utf-8")

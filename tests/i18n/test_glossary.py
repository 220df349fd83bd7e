"""The catalog follows the glossary: where an English message contains a term of docs/zh/glossary.md's table,
its Chinese entry contains the table's Chinese term (placeholders such as {heads} are not words)."""

from __future__ import annotations

import re
from pathlib import Path

from scratchformer import i18n

GLOSSARY = Path(__file__).resolve().parents[2] / "docs" / "zh" / "glossary.md"


def glossary() -> dict[str, str]:
    """English variant -> Chinese term, from the first table of docs/zh/glossary.md."""
    rows = GLOSSARY.read_text(encoding="utf-8").split("| English |", 1)[1].splitlines()[2:]
    terms = {}
    for row in rows:
        if not row.startswith("|"):
            break
        english, chinese = (c.strip() for c in row.strip("|").split("|")[:2])
        for variant in english.split(" / "):
            terms[variant] = chinese
    return terms


# an English word that is spelled like a term and means something else there (msgid start, term): the reason
NOT_THE_TERM = {
    ("refusing to unpickle {path}: it references", "reference"): "the verb (it refers to), not a reference translation",
    ("--api-key '': give a key", "key"): "serve's API key (a password: 密钥), not attention's key",
    ("--api-key: the key is not valid", "key"): "serve's API key (a password: 密钥), not attention's key",
    ("--host {host}: anyone who can reach", "key"): "serve's API key (a password: 密钥), not attention's key",
}


def uses(message: str, term: str) -> bool:
    """`term` (or its plural / -ed form) as a word of `message`, outside {placeholders} and code (`backticks`,
    key=value, dotted.names such as torch.distributed.checkpoint); hyphens join words."""
    if any(message.startswith(start) and term == word for start, word in NOT_THE_TERM):
        return False
    text = re.sub(r"\{[^}]*\}|`[^`]*`|\S+=\S+|\w+(?:\.\w+)+", " ", message)
    return re.search(rf"(?<![\w-]){re.escape(term)}(?:e?s|ed)?(?![\w-])", text, re.IGNORECASE) is not None


def test_the_glossary_has_the_issues_terms():
    terms = glossary()
    assert terms["token"] == "词元" and terms["mask"] == "掩码" and terms["residual"] == "残差"
    assert terms["layer normalization"] == terms["LayerNorm"] == "层归一化"
    assert terms["brevity penalty"] == "简短惩罚" and terms["length penalty"] == "长度惩罚"
    assert len(terms) >= 40


def test_uses_matches_words_not_parts_of_words():
    assert uses("output {hyp_len} tokens", "token") and uses("decoder self-attention (masked)", "mask")
    assert uses("{heads} heads", "head")  # the word after the placeholder still counts
    assert not uses("uniform: ln {keys}", "key")  # a placeholder is not a word
    assert not uses("BatchNorm", "batch") and not uses("cross-attention", "attention")
    assert not uses("`lab heads` needs", "head") and not uses("head='classification' needs", "head")
    assert not uses("not a torch.distributed.checkpoint file", "checkpoint") and uses("a checkpoint file", "checkpoint")


def test_the_catalog_uses_the_glossary_terms():
    terms, catalog = glossary(), i18n.read_po(i18n.catalog_path("zh"))
    wrong = [f"{msgid!r}: {term} -> {chinese}, got {msgstr!r}" for msgid, msgstr in catalog.items() if msgid
             for term, chinese in terms.items() if uses(msgid, term) and chinese not in msgstr]
    assert not wrong, "catalog entries that do not use the glossary's term:\n" + "\n".join(wrong)

"""Copies put back (`--repair-copies`): names, numbers, paths and options the model should have copied from the
source but wrote wrongly.

    repair_copies("Rename it to gentoo.1.xml", "重命名为 gentoo.xmlent") -> "重命名为 gentoo.1.xml"
    repair_copies("See Figure 16.223.", "见图 16.23。") -> "见图 16.223。"
    repair_copies('Section 8.53, “Export Histogram”', "第 8.53 节 “Histrion”") -> "第 8.53 节 “Export Histogram”"

A translation into Chinese (or another script) writes in Latin letters and digits only what it copies: program
and package names, file names, options, numbers. A small model copies them through two vocabularies, piece by
piece, and gets them slightly wrong ("dlocate" -> "dlat", "--show-overrides" -> "-hoverideride-..."). The rules:

  - an output without a single CJK character is left alone: there every word is Latin, and a German "Haus" is not
    a mangled "house";
  - first, quoted names: a quoted part of the output (“...”, "...", 「...」 or 『...』, holding no other quote
    mark) written in Latin letters without CJK, that is not the content of a quoted part of the source (in any
    case), is replaced by the most similar source quotation in Latin letters still unused, when that similarity is
    at least `threshold` or it is the only one left; a quoted name the model translated (CJK inside) stays. The
    model may write each word of "Export Histogram" as a real word that is not in the source ("Histrion"), so
    the spans below alone miss it;
  - then, spans: a *span* is a run of Latin letters and digits, with `. _ - + / ~ : = '` inside it and an
    optional leading `-`, `--`, `/` or `~/` (COPYABLE). Each span of the output that is not a span of the source,
    nor a part of one between its `.+-/...`, nor either of those in another case ("Markdown" for "markdown"), is
    replaced by the most similar source span that is still unused (difflib's ratio, ignoring case; each source
    span may stand in the output as many times as it stands in the source), when that similarity is at least
    `threshold`; otherwise it stays as it is;
  - a span of one character stays, and a lower-case word of 1-3 letters ("in", "can") never stands in: such
    words are translated, not copied.

It is the text-level cousin of OpenNMT's `-replace_unk` and CTranslate2's `replace_unknowns` (which replace an
<unk> with the source token it attends to most). The threshold 0.4 was chosen on the validation splits of the
`software` corpus (0.3-0.6 tried; docs/corpus.md), the quoted names' rule on them too (+2.2 GIMP, +0.1 Debian
FAQ, no source lower; README "Beyond one manual"); a model trained to copy (a shared vocabulary, or a pointer) would
need none of this.
"""

from __future__ import annotations

import re
from collections import Counter
from collections.abc import Sequence
from difflib import SequenceMatcher

from scratchformer.decoding.sentences import _CJK_CHAR

COPYABLE = re.compile(r"(?:--?|~?/)?[A-Za-z0-9_](?:[A-Za-z0-9_.+/\-~:=']*[A-Za-z0-9_/])?")
_PARTS = re.compile(r"[A-Za-z0-9]+")  # "Shift" and "Right" of "Shift+Right", "gitignore" of "to.gitignore"
_SHORT_WORD = re.compile(r"[a-z]{1,3}")  # "in", "can", "the": translated, never copied, so never a stand-in
THRESHOLD = 0.4
_QUOTE_PAIRS = ("“”", '""', "「」", "『』")
_QUOTE_CHARS = "".join(dict.fromkeys("".join(_QUOTE_PAIRS)))
# one alternative per pair, each (open)(inner)(close): m.group(m.lastindex) is the close, the two before it
# the inner part and the open
_QUOTED = re.compile("|".join(f"({re.escape(o)})([^{_QUOTE_CHARS}]+)({re.escape(c)})" for o, c in _QUOTE_PAIRS))
_LATIN = re.compile(r"[A-Za-z]")


def similarity(a: str, b: str) -> float:
    """difflib's ratio of the two spans, ignoring case: 1.0 equal, 0.0 nothing in common."""
    return SequenceMatcher(None, a.lower(), b.lower()).ratio()


def _most_similar(text: str, candidates: Sequence[str]) -> tuple[float, str]:
    """The candidate most similar to `text` and its similarity; the first of equals."""
    return max(((similarity(text, c), c) for c in candidates), key=lambda pair: pair[0])


def _names(text: str) -> list[str]:
    """The contents of the quoted parts of `text`, stripped, in order."""
    return [_inner(m).strip() for m in _QUOTED.finditer(text)]


def _inner(match: re.Match) -> str:
    return match.group(match.lastindex - 1)


def _latin_name(text: str) -> bool:
    return bool(_LATIN.search(text)) and not _CJK_CHAR.search(text)


def repair_quotes(source: str, output: str, threshold: float = THRESHOLD) -> str:
    """`output` with each quoted part in Latin letters that quotes nothing of `source` replaced by the most similar
    unused quotation of the source (the first rule above); spaces inside the quotes and the quote marks stay the
    output's."""
    names = [name for name in _names(source) if _latin_name(name)]
    if not names or not _CJK_CHAR.search(output):
        return output
    known = {name.lower() for name in names}
    distinct = list(dict.fromkeys(names))  # in source order
    left = Counter(names)  # how often each source quotation may still be written
    left.subtract(name for name in _names(output) if name in left)

    def replace(match: re.Match) -> str:
        inner = _inner(match)
        name = inner.strip()
        unused = [n for n in distinct if left[n] > 0]
        if not _latin_name(name) or name.lower() in known or not unused:
            return match.group(0)
        score, best = _most_similar(name, unused)
        if score < threshold and len(unused) > 1:
            return match.group(0)
        left[best] -= 1
        pad_left, pad_right = inner[:len(inner) - len(inner.lstrip())], inner[len(inner.rstrip()):]
        return match.group(match.lastindex - 2) + pad_left + best + pad_right + match.group(match.lastindex)

    return _QUOTED.sub(replace, output)


def repair_copies(source: str, output: str, threshold: float = THRESHOLD) -> str:
    """`output` with its miscopied quoted names (repair_quotes), then each span that is not in `source`, replaced
    by their most similar unused source counterpart (the rules above); `output` unchanged when it has no CJK
    character."""
    if not _CJK_CHAR.search(output):
        return output
    output = repair_quotes(source, output, threshold)
    spans = COPYABLE.findall(source)
    if not spans:
        return output
    known = {w.lower() for span in spans for w in (span, *_PARTS.findall(span))}
    stand_ins = [s for s in dict.fromkeys(spans) if not _SHORT_WORD.fullmatch(s)]  # in source order
    left = Counter(spans)  # how often each source span may still be written
    left.subtract(w for w in COPYABLE.findall(output) if w in left)

    def replace(match: re.Match) -> str:
        word = match.group(0)
        unused = [s for s in stand_ins if left[s] > 0]
        if len(word) < 2 or word.lower() in known or not unused:
            return word
        score, best = _most_similar(word, unused)
        if score < threshold:
            return word
        left[best] -= 1
        return best

    return COPYABLE.sub(replace, output)

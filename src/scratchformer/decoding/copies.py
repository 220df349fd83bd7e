"""Copies put back (`--repair-copies`): names, numbers, paths and options the model should have copied from the
source but wrote wrongly.

    repair_copies("Rename it to gentoo.1.xml", "重命名为 gentoo.xmlent") -> "重命名为 gentoo.1.xml"
    repair_copies("See Figure 16.223.", "见图 16.23。") -> "见图 16.223。"

A translation into Chinese (or another script) writes in Latin letters and digits only what it copies: program
and package names, file names, options, numbers. A small model copies them through two vocabularies, piece by
piece, and gets them slightly wrong ("dlocate" -> "dlat", "--show-overrides" -> "-hoverideride-..."). The rule:

  - a *span* is a run of Latin letters and digits, with `. _ - + / ~ : = '` inside it and an optional leading
    `-`, `--`, `/` or `~/` (COPYABLE);
  - each span of the output that is not a span of the source, nor a part of one between its `.+-/...`, nor either
    of those in another case ("Markdown" for "markdown"), is replaced by the most similar source span that is still
    unused (difflib's ratio, ignoring case; each source span may stand in the output as many times as it
    stands in the source), when that similarity is at least `threshold`; otherwise it stays as it is;
  - a span of one character stays, and a lower-case word of 1-3 letters ("in", "can") never stands in: such
    words are translated, not copied;
  - an output without a single CJK character is left alone: there every word is Latin, and a German "Haus" is not
    a mangled "house".

It is the text-level cousin of OpenNMT's `-replace_unk` and CTranslate2's `replace_unknowns` (which replace an
<unk> with the source token it attends to most). The threshold 0.4 was chosen on the validation splits of the
`software` corpus (0.3-0.6 tried; docs/corpus.md); a model trained to copy (a shared vocabulary, or a pointer)
would need none of this.
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


def similarity(a: str, b: str) -> float:
    """difflib's ratio of the two spans, ignoring case: 1.0 equal, 0.0 nothing in common."""
    return SequenceMatcher(None, a.lower(), b.lower()).ratio()


def repair_copies(source: str, output: str, threshold: float = THRESHOLD) -> str:
    """`output` with each span that is not in `source` replaced by its most similar unused source span (the rule
    above); `output` unchanged when it has no CJK character or `source` has no span."""
    spans = COPYABLE.findall(source)
    if not spans or not _CJK_CHAR.search(output):
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
        score, best = max(((similarity(word, s), s) for s in unused), key=lambda pair: pair[0])  # first of equals
        if score < threshold:
            return word
        left[best] -= 1
        return best

    return COPYABLE.sub(replace, output)


def repair_all(sources: Sequence[str], outputs: Sequence[str], threshold: float = THRESHOLD) -> list[str]:
    """repair_copies for each (source, output) pair."""
    return [repair_copies(s, o, threshold) for s, o in zip(sources, outputs, strict=True)]

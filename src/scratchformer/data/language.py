"""Is this text in the model's source language? A script count, not a language detector: enough to tell a
mostly-Chinese sentence from an English one, which is the mistake that matters here (seed 002's "我 爱 中国" given
to our en->zh model comes back as byte pieces read as English, 「偏好运行」, with no hint why).

    cjk_share(text)                 share of the letters that are CJK (Han, kana, hangul); None without letters
    looks_like(text, lang)          True / False, or None when there are too few letters to tell
    wrong_language(texts, corpus)   one line saying which inputs are not in the corpus's source language, or None
    wrong_pair(texts, source, target)  the same for a pair given outright (serve: its JSON "warning" and a log line)
    warn_wrong_language(...)        the same line as a LanguageWarning (the CLI prints warnings as one line)
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from scratchformer.data.corpus import corpus_languages

CJK_LANGUAGES = ("zh", "ja", "ko")
_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF),
               (0x20000, 0x2FFFF))
MIN_LETTERS = 2  # "OK" or "是" alone says little; two letters of one script are a fair sign


class LanguageWarning(UserWarning):
    """The input is not in the source language of the model that translates it."""


def _is_cjk(char: str) -> bool:
    code = ord(char)
    return any(lo <= code <= hi for lo, hi in _CJK_RANGES)


def cjk_share(text: str) -> float | None:
    """CJK letters / all letters (digits, spaces and punctuation do not count); None if `text` has no letters."""
    letters = [c for c in text if c.isalpha()]
    if not letters:
        return None
    return sum(_is_cjk(c) for c in letters) / len(letters)


def looks_like(text: str, lang: str) -> bool | None:
    """Whether `text` is written in the script of `lang`: mostly CJK for zh / ja / ko, mostly not CJK for any
    other language. None when it has fewer than MIN_LETTERS letters."""
    if sum(c.isalpha() for c in text) < MIN_LETTERS:
        return None
    mostly_cjk = (cjk_share(text) or 0.0) > 0.5
    return mostly_cjk if lang in CJK_LANGUAGES else not mostly_cjk


def wrong_language(texts: Sequence[str], corpus: str | None) -> str | None:
    """One line when some of `texts` are not in the source language of `corpus` (a run's training corpus: its
    language pair is known for the bundled corpora and names like en-zh); None when all look right or the pair
    is unknown."""
    pair = corpus_languages(corpus)
    return None if pair is None else wrong_pair(texts, *pair)


def wrong_pair(texts: Sequence[str], source: str, target: str) -> str | None:
    """`wrong_language` for a known pair (serve's --source / --target): one line, or None when all look right."""
    wrong = [i for i, t in enumerate(texts) if looks_like(t, source) is False]
    if not wrong:
        return None
    script = "mostly CJK" if source not in CJK_LANGUAGES else "not CJK"
    which = "the input is" if len(texts) == 1 else f"{len(wrong)} of {len(texts)} inputs (first: #{wrong[0] + 1}) are"
    return (f"{which} {script}, but this model translates {source}->{target}: it reads {source} only, so expect "
            f"nonsense; give {source} text")


def warn_wrong_language(texts: Sequence[str], corpus: str | None) -> None:
    """`wrong_language` as a LanguageWarning, if it has something to say."""
    line = wrong_language(texts, corpus)
    if line:
        warnings.warn(line, LanguageWarning, stacklevel=2)

"""Which language is this text in? py3langid's naive Bayes over byte n-grams (its model ships in the package:
nothing is downloaded), restricted to the languages of LANGUAGE_NAMES, with the script deciding for mostly-CJK
text (kana: Japanese, hangul: Korean, else Chinese), where a two-character "保存" is clear but has few n-grams.
Used for the wrong-language warning of `translate` and `plot attention`, and serve's /detect and source "auto".

    detect(text)                    (code, confidence 0-1), or (None, 0.0) with fewer than MIN_LETTERS letters
    wrong_language(texts, corpus)   one line, in the user's language, naming the language of the inputs that are
                                    not in the corpus's source language; or None
    wrong_pair(texts, source, target)  the same for a pair given outright (serve: its JSON "warning", a log line)
    warn_wrong_language(...)        the same line as a LanguageWarning (the CLI prints warnings as one line)

Why py3langid, restricted: measured by benchmarks/language_detection.py (docs/serving.md has the figures). Over
its 97 languages it calls "Hello world" Fulah and 1 in 5 short English UI strings something else; over these 16
it names 87% of 1,000 English test lines English and the rest with low confidence (at most 0.57), so a warning
at CONFIDENT never fires on them, while it fires on 98.6% of their Chinese sides and 44 of 50 short French UI
strings. lingua-language-detector over the same 16 scored about the same (89.5% / 99.1% / 94% right) but is
~100 MB installed (py3langid: ~5 MB) and took ~9 ms a line against 0.3 ms.
"""

from __future__ import annotations

import functools
import threading
import warnings
from collections.abc import Sequence

from scratchformer.data.corpus import corpus_languages
from scratchformer.i18n import N_, _

# The languages the detector chooses among, with their English names (marked for the catalog: "French" / "法语");
# serve's /languages names a run's languages from here too.
LANGUAGE_NAMES = {"en": N_("English"), "zh": N_("Chinese"), "de": N_("German"), "fr": N_("French"),
                  "es": N_("Spanish"), "it": N_("Italian"), "ja": N_("Japanese"), "ko": N_("Korean"),
                  "ru": N_("Russian"), "pt": N_("Portuguese"), "nl": N_("Dutch"), "ar": N_("Arabic"),
                  "cs": N_("Czech"), "ro": N_("Romanian"), "tr": N_("Turkish"), "vi": N_("Vietnamese")}
CJK_LANGUAGES = ("zh", "ja", "ko")
_CJK_RANGES = ((0x3040, 0x30FF), (0x3400, 0x4DBF), (0x4E00, 0x9FFF), (0xAC00, 0xD7AF), (0xF900, 0xFAFF),
               (0x20000, 0x2FFFF))
MIN_LETTERS = 2  # "OK" or "是" alone says little; two letters are a fair sign of a script, not of a language
CONFIDENT = 0.65  # a detection this sure or more is acted on (a warning, serve's 400 for source "auto"); the
# most sure wrong call on 1,000 English test lines is 0.57 (benchmarks/language_detection.py)


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


_LOADING = threading.Lock()


def _identifier():
    """py3langid's identifier over LANGUAGE_NAMES, loaded once (about a second: its model is xz-compressed); a
    second caller waits for the first one's load rather than loading it again."""
    with _LOADING:
        return _load_identifier()


@functools.cache
def _load_identifier():
    from py3langid.langid import MODEL_FILE, LanguageIdentifier

    identifier = LanguageIdentifier.from_model_file(MODEL_FILE, norm_probs=True)
    identifier.set_languages(list(LANGUAGE_NAMES))
    return identifier


def prefetch() -> None:
    """Load the detector's model in a background thread (xz decompression lets other threads run), so that a
    command which will check its input pays for it while it loads its own model, not after."""
    threading.Thread(target=_identifier, name="language-model", daemon=True).start()


def detect(text: str) -> tuple[str | None, float]:
    """(language code, confidence from 0 to 1) of `text`; (None, 0.0) when it has fewer than MIN_LETTERS letters.
    Mostly-CJK text goes by its script (confidence: the CJK share, or py3langid's probability if it agrees); the
    rest by py3langid over LANGUAGE_NAMES (confidence: its normalised probability; 1/16 for text with no n-gram
    it knows, such as "OK")."""
    letters = [c for c in text if c.isalpha()]
    if len(letters) < MIN_LETTERS:
        return None, 0.0
    cjk = [c for c in letters if _is_cjk(c)]
    if len(cjk) > len(letters) / 2:
        kana = sum(0x3040 <= ord(c) <= 0x30FF for c in cjk)
        hangul = sum(0xAC00 <= ord(c) <= 0xD7AF for c in cjk)
        code = "ja" if kana and kana >= hangul else "ko" if hangul else "zh"
        guess, probability = _identifier().classify(text)  # sure of it even with Latin words in between
        return code, max(len(cjk) / len(letters), float(probability) if guess == code else 0.0)
    code, probability = _identifier().classify(text)
    return code, float(probability)


def language_name(code: str) -> str:
    """The language's name in the user's language ("French" / "法语"); the code itself for one we do not name."""
    return _(LANGUAGE_NAMES[code]) if code in LANGUAGE_NAMES else code


def looks_like(text: str, lang: str) -> bool | None:
    """Whether `text` is in `lang`: False when it is confidently (CONFIDENT) another language, None when it has
    fewer than MIN_LETTERS letters, True otherwise (a short or ambiguous text gets the benefit of the doubt)."""
    code, confidence = detect(text)
    if code is None:
        return None
    return code == lang or confidence < CONFIDENT


def wrong_language(texts: Sequence[str], corpus: str | None) -> str | None:
    """One line when some of `texts` are not in the source language of `corpus` (a run's training corpus: its
    language pair is known for the bundled corpora and names like en-zh); None when all look right or the pair
    is unknown."""
    pair = corpus_languages(corpus)
    return None if pair is None else wrong_pair(texts, *pair)


def wrong_pair(texts: Sequence[str], source: str, target: str) -> str | None:
    """`wrong_language` for a known pair (serve's --source / --target): one line, or None when all look right."""
    wrong = []
    for i, text in enumerate(texts):
        code, confidence = detect(text)
        if code is not None and code != source and confidence >= CONFIDENT:
            wrong.append((i, code))
    if not wrong:
        return None
    first, code = wrong[0]
    fields = {"language": language_name(code), "source": source, "target": target,
              "source_name": language_name(source), "n": len(wrong), "total": len(texts), "first": first + 1}
    if len(texts) == 1:
        return _("the input looks like {language}, but this model translates {source}->{target}: it reads "
                 "{source_name} only, so expect nonsense; give {source_name} text").format(**fields)
    return _("{n} of {total} inputs are not {source_name} (first: #{first}, which looks like {language}), but this "
             "model translates {source}->{target}: it reads {source_name} only, so expect nonsense; give "
             "{source_name} text").format(**fields)


def warn_wrong_language(texts: Sequence[str], corpus: str | None) -> None:
    """`wrong_language` as a LanguageWarning, if it has something to say."""
    line = wrong_language(texts, corpus)
    if line:
        warnings.warn(line, LanguageWarning, stacklevel=2)

"""The tools' language: English or Chinese, through Python's own `gettext` and the catalogs in locale/.

    _(message)          the message in the chosen language (English when the catalog lacks it)
    N_(message)         marks a message for translation where it is defined (a module constant), unchanged;
                        `_()` translates it where it is shown (defined in errors.py, the lowest room; re-exported)
    say(template, **f)  the template translated, then filled in (a log or warning line of training)
    set_language(lang)  "zh", "en", or None: from the environment (LANGUAGE, LC_ALL, LC_MESSAGES, LANG, as
                        gettext reads them: `LANG=zh_CN.UTF-8` -> "zh")
    pad(text, width)    left-justify by display width: a Chinese character takes two columns in a terminal

The catalog is locale/zh/LC_MESSAGES/scratchformer.po (edited by hand) and its compiled .mo (shipped as package
data). `python -m scratchformer.i18n` recompiles the .mo from the .po in a source checkout (never inside an
installed package: there the tools read the .mo it was built with); tests/i18n checks that the two agree, that
every message marked with _() or N_() in the source has a Chinese entry, and that the entries use the glossary's
terms (docs/zh/glossary.md). Errors and warnings are Chinese too: errors.py keeps an error's English template and
fields, and the CLI translates it where it shows it (`localized(e, _)`); `str(e)`, what library users and the tests
see, stays English. tests/i18n/test_untranslated.py holds --help, errors and progress lines to Chinese. Floor 1:
imports only errors.py (floor 0): `N_`, and `localized` for `say`.
"""

from __future__ import annotations

import ast
import gettext
import os
import struct
import unicodedata
from collections.abc import Mapping
from pathlib import Path

from scratchformer.errors import N_, Localizable, localized  # noqa: F401 (N_ re-exported: defined once, in errors.py)

DOMAIN = "scratchformer"
LOCALE_DIR = Path(__file__).parent / "locale"
LANGUAGES = ("en", "zh")
_state: dict[str, object] = {"lang": None, "catalog": None}


def language_from_env(environ: Mapping[str, str] | None = None) -> str:
    """"zh" or "en" from the locale variables, in gettext's order: LANGUAGE (a list), LC_ALL, LC_MESSAGES, LANG."""
    environ = os.environ if environ is None else environ
    for name in ("LANGUAGE", "LC_ALL", "LC_MESSAGES", "LANG"):
        value = environ.get(name, "")
        for entry in value.split(":") if name == "LANGUAGE" else [value]:
            code = entry.strip().lower()
            if code.startswith("zh"):
                return "zh"
            if code and (name != "LANGUAGE" or code.startswith("en")):
                return "en"  # "C", "POSIX", "en_US.UTF-8", "de_DE": no Chinese asked for
    return "en"


def set_language(lang: str | None = None) -> str:
    """Choose the language of `_()`; None reads the environment. Returns the language chosen."""
    lang = language_from_env() if lang is None else lang
    if lang not in LANGUAGES:
        raise ValueError(f"--lang {lang}: choose one of {', '.join(LANGUAGES)}")
    if lang == "en":
        catalog: gettext.NullTranslations = gettext.NullTranslations()
    else:
        catalog = gettext.translation(DOMAIN, LOCALE_DIR, languages=[lang], fallback=True)
    _state.update(lang=lang, catalog=catalog)
    return lang


def can_show(stream: object, lang: str) -> bool:
    """Whether `stream` (sys.stdout) can write text in `lang`: a stream whose encoding has no Chinese (ascii,
    latin-1) cannot show "zh" (its errors handler may still escape it: then it can). None or a stream without an
    encoding: yes (nothing to fail)."""
    encoding = getattr(stream, "encoding", None)
    if lang == "en" or not encoding:
        return True
    try:
        "中文，（）：".encode(encoding, getattr(stream, "errors", None) or "strict")
    except (UnicodeEncodeError, LookupError):
        return False
    return True


def language() -> str:
    """The language `_()` speaks now ("en" or "zh")."""
    if _state["lang"] is None:
        set_language(None)
    return str(_state["lang"])


def _(message: str) -> str:
    """`message` in the chosen language."""
    if _state["catalog"] is None:
        set_language(None)
    return _state["catalog"].gettext(message)  # type: ignore[union-attr]


def say(message: str, **fields: object) -> str:
    """`message` (a template marked with N_) in the chosen language, filled in with `fields`; a field that is an
    error with a template (a CheckpointError that caused a fallback) is translated too."""
    if not fields:
        return _(message)
    return _(message).format(**{k: localized(v, _) if isinstance(v, Localizable) else v for k, v in fields.items()})


def width(text: str) -> int:
    """Columns `text` takes in a terminal: wide (CJK) characters count two."""
    return sum(2 if unicodedata.east_asian_width(c) in "WF" else 1 for c in text)


def pad(text: str, columns: int, right: bool = False) -> str:
    """`text` padded with spaces to `columns` display columns (on the left when `right`)."""
    fill = " " * max(0, columns - width(text))
    return fill + text if right else text + fill


# -- the catalog: .po text -> .mo bytes (what GNU msgfmt does, for the subset of .po we write) -------------------

def read_po(path: str | Path) -> dict[str, str]:
    """msgid -> msgstr of a .po file (the header under ""); multi-line strings are joined."""
    entries: dict[str, str] = {}
    key, parts = None, {"msgid": [], "msgstr": []}

    def flush() -> None:
        if parts["msgid"] or parts["msgstr"]:
            entries["".join(parts["msgid"])] = "".join(parts["msgstr"])

    for line in Path(path).read_text(encoding="utf-8").splitlines() + [""]:
        line = line.strip()
        if line.startswith("msgid "):
            flush()
            parts = {"msgid": [], "msgstr": []}
            key, line = "msgid", line[6:]
        elif line.startswith("msgstr "):
            key, line = "msgstr", line[7:]
        if line.startswith('"') and key:
            parts[key].append(ast.literal_eval(line))  # a C-style quoted string: \" \\ \n as in Python
        elif not line or line.startswith("#"):
            continue
    flush()
    return entries


def mo_bytes(entries: Mapping[str, str]) -> bytes:
    """The GNU .mo file of `entries` (untranslated ones left out, so gettext falls back to English)."""
    items = sorted((k.encode(), v.encode()) for k, v in entries.items() if v)
    ids = strs = b""
    offsets = []
    for k, v in items:
        offsets.append((len(ids), len(k), len(strs), len(v)))
        ids += k + b"\0"
        strs += v + b"\0"
    start = 7 * 4 + 16 * len(items)  # header, then the two tables of (length, offset)
    table_ids = b"".join(struct.pack("<2I", n, start + o) for o, n, _, _ in offsets)
    table_strs = b"".join(struct.pack("<2I", n, start + len(ids) + o) for _, _, o, n in offsets)
    header = struct.pack("<7I", 0x950412DE, 0, len(items), 7 * 4, 7 * 4 + 8 * len(items), 0, 0)
    return header + table_ids + table_strs + ids + strs


def catalog_path(lang: str = "zh", suffix: str = ".po") -> Path:
    return LOCALE_DIR / lang / "LC_MESSAGES" / f"{DOMAIN}{suffix}"


def source_checkout() -> bool:
    """Whether the package runs from a source checkout (src/scratchformer/locale with pyproject.toml two floors up,
    an editable install included) rather than an installed copy, whose files are the build's, never rewritten."""
    return (LOCALE_DIR.parents[2] / "pyproject.toml").is_file()


def compile_catalogs(locale_dir: str | Path | None = None) -> list[Path]:
    """Write LANG/LC_MESSAGES/scratchformer.mo under `locale_dir` (default: the checkout's locale/) from the
    package's .po files, each written whole (temporary name + rename); returns the files written. Build time and
    tests only: at run time gettext reads the .mo shipped."""
    written = []
    for lang in LANGUAGES[1:]:
        mo = Path(locale_dir or LOCALE_DIR) / lang / "LC_MESSAGES" / f"{DOMAIN}.mo"
        mo.parent.mkdir(parents=True, exist_ok=True)
        tmp = mo.with_name(f".{mo.name}.tmp")
        tmp.write_bytes(mo_bytes(read_po(catalog_path(lang))))
        os.replace(tmp, mo)
        written.append(mo)
    return written


def main(argv: list[str] | None = None) -> int:
    """`python -m scratchformer.i18n [LOCALE_DIR]`: compile the catalogs in this checkout (or into LOCALE_DIR).
    Returns the exit status; an installed package is refused in one line (its .mo is the build's)."""
    import sys

    argv = sys.argv[1:] if argv is None else argv
    if not argv and not source_checkout():
        print(f"scratchformer.i18n: error: {LOCALE_DIR} is an installed package: its catalogs were compiled when it "
              "was built; run this in a source checkout, or give a folder to write into", file=sys.stderr)
        return 2
    for path in compile_catalogs(argv[0] if argv else None):
        print(f"wrote {path}")
    return 0


if __name__ == "__main__":
    raise SystemExit(main())

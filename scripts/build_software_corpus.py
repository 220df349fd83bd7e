#!/usr/bin/env python3
"""Build the bundled English-Chinese software-documentation corpus ``software`` from several packages.

Sources (fixed versions, in this order; see ``SOURCES``)
--------------------------------------------------------
- ``libreoffice``: the en-zh pipeline of ``build_corpus.py``, kept exactly as the en-zh bundle splits it
  (so its test split is the old en-zh test split).
- ``gimp``, ``debian-faq``, ``maint-guide``, ``debian-edu``: DocBook-generated HTML from Debian packages,
  aligned by document structure (``docbook_pairs``); their multi-sentence train paragraphs (and those too long
  to keep) also give sentence-level train pairs where both sides have as many sentences (``add_sentence_pairs``).
- ``django``, ``jupyterlab``: gettext catalogs (``.mo``) from PyPI wheels, aligned by msgid
  (``gettext_pairs``); messages with placeholders dropped, accelerators removed, English of 3+ words only.

Debian packages come from ``apt-get download PKG=VERSION``, wheels from ``pip download --no-deps``; both are
read in place (a .deb as an ``ar`` archive, a wheel as a zip): nothing is installed.

Split
-----
Per source, with ``build_corpus.split_pairs`` (groups of pairs sharing a normalised English or Chinese
sentence, ordered by SHA-256, no RNG).  A pair of a later source that shares any sentence (exact or
normalised, either side) with an earlier source is dropped ("cross-source overlap"), so groups never span
sources and no test/valid sentence of any source occurs in any train split.

Usage
-----
    python scripts/build_software_corpus.py                    # downloads into a temporary directory
    python scripts/build_software_corpus.py --cache /tmp/swsrc # reuses / keeps the downloads there
    python scripts/build_software_corpus.py --check            # rebuild, compare sha256 with the bundle

Standard library only (plus the ``apt-get`` and ``pip`` clients for downloading, and scratchformer's own sentence
splitter, ``decoding/sentences.py``).
"""

from __future__ import annotations

import argparse
import gettext
import hashlib
import io
import json
import re
import subprocess
import sys
import tempfile
import zipfile
from dataclasses import dataclass, field
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_corpus as bc  # noqa: E402  (sibling script)

from scratchformer.decoding.sentences import split_sentences as _split  # noqa: E402  (the rule translate uses)


def split_sentences(text: str) -> list[str]:
    """The sentence rule the bundle was cut with (commit 9c65179): `translate --set split_sentences=true`'s rule as it
    was then, before a section number ("3.2.") stayed with its sentence. Pinned, so that a change to how translate
    splits cannot change the bundle that `--check` rebuilds byte for byte (it did once, unnoticed)."""
    return _split(text, join_labels=False)

OUT = bc.DEFAULT_OUT / "software"
MAX_EVAL = 500  # test and valid pairs per source at most (libreoffice keeps the en-zh 1000/1000)
MIN_EVAL = 50  # ... and at least, where the source has 10 times that

Pair = tuple[str, str]


@dataclass(frozen=True)
class Source:
    """One source: how to get its two sides and how to align them."""

    name: str
    kind: str  # "lohelp" | "docbook" | "gettext"
    packages: tuple[tuple[str, str], ...]  # (package, exact version); Debian .debs or PyPI wheels
    licence: str  # as stated by the package's copyright/licence file
    licence_marker: str  # must occur in that file (checked at build time)
    licence_file: str  # path inside the package numbered licence_in
    en_dir: str = ""  # docbook: folder of the English pages inside the first package
    en_suffix: str = ""
    zh_dir: str = ""  # ... and of the Chinese pages inside the second package
    zh_suffix: str = ""
    catalogs: str = ""  # gettext: regex on member names of the wheel
    note: str = ""  # what was done, for the NOTICE
    licence_in: int = 0  # which of `packages` holds licence_file


SOURCES = (
    Source(
        "libreoffice", "lohelp",
        (("libreoffice-help-en-us", "4:7.4.7-1+deb12u14"), ("libreoffice-help-zh-cn", "4:7.4.7-1+deb12u14")),
        "MPL-2.0, Copyright The Document Foundation and the LibreOffice contributors", "License: MPL-2.0",
        "usr/share/doc/libreoffice-help-en-us/copyright",
        note="The en-zh bundle (scripts/build_corpus.py), train/valid/test exactly as en-zh splits them: "
        "aligned by (page path, paragraph id).",
    ),
    Source(
        "gimp", "docbook",
        (("gimp-help-en", "2.10.34-2"), ("gimp-help-zh-cn", "2.10.34-2"), ("gimp-help-common", "2.10.34-2")),
        "GFDL-1.2+ (no Invariant Sections, no Front-Cover or Back-Cover Texts), "
        "Copyright The GIMP Documentation Team", "License: GFDL-NIV-1.2+",
        "usr/share/doc/gimp-help-common/copyright", licence_in=2,
        en_dir="usr/share/gimp/2.0/help/en/", en_suffix=".html",
        zh_dir="usr/share/gimp/2.0/help/zh_CN/", zh_suffix=".html",
        note="GIMP 2.10 user manual (DocBook HTML). gimp-help-common is downloaded only for its copyright file "
        "(the doc folders of -en and -zh-cn link to it). Most of the Chinese manual is untranslated English; "
        "those blocks are dropped.",
    ),
    Source(
        "debian-faq", "docbook", (("debian-faq", "11.1"), ("debian-faq-zh-cn", "11.1")),
        "verbatim/modified copies and translations permitted under an identical permission notice, "
        "Copyright (C) 1996-2003 Software in the Public Interest",
        "Permission is granted to copy and distribute translations", "usr/share/doc/debian-faq/copyright",
        en_dir="usr/share/doc/debian/FAQ/", en_suffix=".en.html",
        zh_dir="usr/share/doc/debian/FAQ/zh-cn/", zh_suffix=".zh-cn.html",
        note="The Debian GNU/Linux FAQ (DocBook HTML).",
    ),
    Source(
        "maint-guide", "docbook", (("maint-guide", "1.2.53"), ("maint-guide-zh-cn", "1.2.53")),
        "GPL-2.0+, Copyright 1998-2002 Josip Rodin, 2005-2015 Osamu Aoki, 2010 Craig Small, 2010 Raphael Hertzog",
        "License:   GPL-2.0+", "usr/share/doc/maint-guide/copyright",
        en_dir="usr/share/doc/maint-guide/html/", en_suffix=".en.html",
        zh_dir="usr/share/doc/maint-guide-zh-cn/html/", zh_suffix=".zh-cn.html",
        note="The Debian New Maintainers' Guide (DocBook HTML).",
    ),
    Source(
        "debian-edu", "docbook",
        (("debian-edu-doc-en", "2.12.23~deb12u1"), ("debian-edu-doc-zh-cn", "2.12.23~deb12u1")),
        "GPL-2+, Copyright Holger Levsen, Petter Reinholdtsen and the Debian Edu manual authors and translators",
        "License: GPL-2+", "usr/share/doc/debian-edu-doc-en/copyright",
        en_dir="usr/share/doc/debian-edu-doc-en/", en_suffix="-manual.html",
        zh_dir="usr/share/doc/debian-edu-doc-zh-cn/", zh_suffix="-manual.html",
        note="The Debian Edu bookworm and bullseye manuals (one DocBook HTML page each; po4a translations).",
    ),
    Source(
        "django", "gettext", (("django", "5.2.19"),),
        "BSD-3-Clause, Copyright Django Software Foundation and individual contributors",
        "Redistribution and use in source and binary forms", "django-5.2.19.dist-info/licenses/LICENSE",
        catalogs=r"^django/(conf|contrib/[a-z_]+)/locale/zh_Hans/LC_MESSAGES/[a-z]+\.mo$",
        note="gettext catalogs django/conf/locale/zh_Hans and django/contrib/*/locale/zh_Hans (django.mo, "
        "djangojs.mo): msgid -> msgstr (plural: first form; message context dropped).",
    ),
    Source(
        "jupyterlab", "gettext", (("jupyterlab-language-pack-zh-cn", "4.5.post3"),),
        "BSD-3-Clause, Copyright Project Jupyter Contributors",
        "Redistribution and use in source and binary forms",
        "jupyterlab_language_pack_zh_cn-4.5.post3.dist-info/licenses/LICENSE.txt",
        catalogs=r"^jupyterlab_language_pack_zh_CN/locale/zh_CN/LC_MESSAGES/[A-Za-z_]+\.mo$",
        note="gettext catalogs of JupyterLab and its extensions (locale/zh_CN/LC_MESSAGES/*.mo): msgid -> msgstr "
        "(plural: first form; message context dropped).",
    ),
)
SOURCE_NAMES = tuple(s.name for s in SOURCES)
LEFT_OUT = {
    "linuxcnc": "linuxcnc-doc-en/-zh-cn 2.9.0~pre1+git20230208.f1270d6ed7-1+deb12u2 ship their manuals only as PDF "
    "(no stdlib text extraction) and their one HTML page, gcode_zh_CN.html, has no Chinese text; not used.",
}

# --------------------------------------------------------------------------- getting the packages


def _is_wheel_source(src: Source) -> bool:
    return src.kind == "gettext"


def fetch(src: Source, cache: Path) -> list[Path]:
    """The files of `src`'s packages (exact versions), from `cache` or downloaded into it."""
    return [_wheel(p, v, cache) if _is_wheel_source(src) else _deb(p, v, cache) for p, v in src.packages]


def _deb(package: str, version: str, cache: Path) -> Path:
    quoted = version.replace(":", "%3a")
    path = cache / f"{package}_{quoted}_all.deb"
    if not path.is_file():
        cmd = ["apt-get", "download", f"{package}={version}"]
        # the clients' chatter goes to stderr: stdout is the --check verdict
        if subprocess.run(cmd, cwd=cache, stdout=sys.stderr).returncode != 0:
            subprocess.run(["apt-get", "update"], check=False, stdout=sys.stderr)
            subprocess.run(cmd, cwd=cache, check=True, stdout=sys.stderr)
    if not path.is_file() or bc.deb_version(path) != version:
        sys.exit(f"{path}: expected {package} {version}")
    return path


def _wheel(package: str, version: str, cache: Path) -> Path:
    stem = f"{package.replace('-', '_')}-{version}-".lower()
    found = [p for p in cache.glob("*.whl") if p.name.lower().startswith(stem)]
    if not found:
        cmd = [sys.executable, "-m", "pip", "download", "--no-deps", "--only-binary=:all:", "-d", str(cache),
               f"{package}=={version}"]
        subprocess.run(cmd, check=True, stdout=sys.stderr)
        found = [p for p in cache.glob("*.whl") if p.name.lower().startswith(stem)]
    if len(found) != 1:
        sys.exit(f"{cache}: expected one wheel {stem}*.whl, found {len(found)}")
    return found[0]


def licence_text(src: Source, files: list[Path]) -> str:
    """The copyright/licence file of `src` (checked to state the licence we record)."""
    if _is_wheel_source(src):
        text = zipfile.ZipFile(files[src.licence_in]).read(src.licence_file).decode("utf-8")
    else:
        text = bc.deb_files(files[src.licence_in], src.licence_file)[""].decode("utf-8")
    if src.licence_marker not in text:
        sys.exit(f"{src.name}: {src.licence_file} no longer says {src.licence_marker!r}; review the licence")
    return text


# --------------------------------------------------------------------------- cleaning shared by the new sources

# gettext placeholders: %(name)s, %s, %d, %1 (Qt/JupyterLab style), {0}, {name}, {}, {0:d}; "%%" is a literal %
PLACEHOLDER = re.compile(
    r"%\([^)]*\)[#0+-]*\d*(?:\.\d+)?[a-zA-Z]|%[#0+-]*\d*(?:\.\d+)?[sdifrxXeEgGcu](?![A-Za-z])|%\d+|"
    r"\{[A-Za-z_0-9.]*(?::[^{}]*)?\}"
)
ACCEL_ZH = re.compile(r"\s*[(（]\s*[&_][A-Za-z0-9]\s*[)）]")  # 文件(&F), 文件(_F)
ACCEL = re.compile(r"(?<![\w&])[&_](?=[A-Za-z])")  # &File, _File (not "R&D", not "a_b")
EMPTY_BRACKETS = re.compile(r"“\s*”|‘\s*’|\"\s*\"|'\s*'|\(\s*\)|（\s*）|「\s*」|\[\s*\]|【\s*】|<\s*>")
COMMAND = re.compile(r"^\s*[$#] |^\s*(?:sudo|apt-get|apt|dpkg|make|git|cd|ls|cp|mv|rm) [-/.\w]")
LATIN_RUN = re.compile(r"[A-Za-z][A-Za-z0-9'’./+-]*(?: [A-Za-z][A-Za-z0-9'’./+-]*)+")
LATIN_WORD = re.compile(r"[A-Za-z]+")
FOOTNOTE = re.compile(r"^\[\d+\]\s*")  # DocBook footnote numbers: "[40] This target ..."
LEFTOVER = re.compile(r"%\(|%[sd]\b|\{\w*\}|\x00")


def has_placeholder(text: str) -> bool:
    """True if a gettext message has a placeholder (%(name)s, %s, %1, {0}, {name}, ...)."""
    return bool(PLACEHOLDER.search(text.replace("%%", "")))


def strip_placeholders(text: str) -> str:
    """Text with placeholders and accelerators removed and the gaps they leave tidied (the build drops messages
    with placeholders instead, see gettext_pairs: a sentence with a hole is no longer a sentence)."""
    text = text.replace("%%", "\x01")  # a literal percent sign survives
    text = PLACEHOLDER.sub("", text)
    text = ACCEL_ZH.sub("", text)
    text = ACCEL.sub("", text)
    text = EMPTY_BRACKETS.sub("", text).replace("\x01", "%")
    text = re.sub(r"\s+", " ", text).strip()
    text = re.sub(r" ([.,;:!?。，；：！？）)])", r"\1", text)
    return text


def partly_untranslated(en: str, zh: str) -> bool:
    """True if the Chinese side copies English text: a copied run of 3+ Latin words, or copied words that make
    up half the English letters or more and include a lower-case word (names and acronyms such as "Debian",
    "LTSP", "GiB" are legitimately copied; "submenu", "filter options" are not)."""
    en_words = {w.lower() for w in LATIN_WORD.findall(en)}
    en_letters = sum(len(w) for w in LATIN_WORD.findall(en))
    if any(len(run.split()) >= 3 and run.lower() in en.lower() for run in LATIN_RUN.findall(zh)):
        return True
    copied = [w for w in LATIN_WORD.findall(zh) if w.lower() in en_words]
    letters = sum(len(w) for w in copied)
    lower = any(w.islower() and len(w) >= 2 for w in copied)
    return bool(en_letters) and lower and letters / en_letters >= 0.5


def filter_pair(en: str, zh: str, min_words: int = 1) -> str | None:
    """None if the pair is kept, else why it is dropped (build_corpus.keep_pair, then the checks for the new
    sources: command lines, partly untranslated Chinese, leftover placeholders, too few English words)."""
    reason = bc.keep_pair(en, zh, "zh")
    if reason:
        return reason
    if COMMAND.search(en):
        return "command"
    if LEFTOVER.search(en) or LEFTOVER.search(zh):
        return "markup/code"
    if len(LATIN_WORD.findall(en)) < min_words:
        return "short"
    if partly_untranslated(en, zh):
        return "untranslated"
    return None


# --------------------------------------------------------------------------- DocBook HTML -> blocks

BLOCK_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "li", "dt", "dd", "td", "th", "caption", "div", "pre"}
HEADINGS = {"h1", "h2", "h3", "h4", "h5", "h6"}
SKIP_CLASSES = {"navheader", "navfooter", "toc", "list-of-figures", "list-of-tables", "list-of-examples", "index"}
CODE_TAGS = {"pre"}  # code blocks; inline <code> (file and command names) is kept: it is the same in both


def _has_block(node: bc.Node) -> bool:
    return any(isinstance(c, bc.Node) and (c.tag in BLOCK_TAGS or _has_block(c)) for c in node.children)


def _inline_text(node: bc.Node, out: list[str]) -> None:
    for c in node.children:
        if isinstance(c, str):
            out.append(c)
        elif c.tag in CODE_TAGS:
            out.append("\x00CODE\x00")
        elif c.tag == "br":
            out.append(" ")
        elif c.tag not in ("script", "style", "img"):
            _inline_text(c, out)


def html_blocks(page: str) -> list[tuple[str, str]]:
    """(tag, raw text) of every innermost block of a DocBook HTML page, in document order; a code block is
    ("pre", "") so that it counts for the structure but gives no pair. Navigation and tables of contents
    are skipped."""
    tb = bc.TreeBuilder()
    tb.feed(page)
    tb.close()
    blocks: list[tuple[str, str]] = []

    def walk(node: bc.Node) -> None:
        for c in node.children:
            if not isinstance(c, bc.Node) or c.tag in ("script", "style", "head") or bc._classes(c) & SKIP_CLASSES:
                continue
            if c.tag in CODE_TAGS:
                blocks.append((c.tag, ""))
            elif c.tag in BLOCK_TAGS and not _has_block(c):
                out: list[str] = []
                _inline_text(c, out)
                if "".join(out).strip():
                    blocks.append((c.tag, "".join(out)))
            else:
                walk(c)

    walk(tb.root)
    return blocks


def _sections(blocks: list[tuple[str, str]]) -> list[list[tuple[str, str]]]:
    """Blocks cut before every heading."""
    out: list[list[tuple[str, str]]] = [[]]
    for b in blocks:
        if b[0] in HEADINGS and out[-1]:
            out.append([])
        out[-1].append(b)
    return out


def _shape(blocks: list[tuple[str, str]]) -> list[str]:
    return [tag for tag, _ in blocks]


def align_page(en: list[tuple[str, str]], zh: list[tuple[str, str]], stats: dict[str, int]) -> list[Pair]:
    """Raw (en, zh) block texts of one page: the whole page when both have the same block sequence (tags in
    order), else section by section (cut at headings) where the section counts agree and a section's
    block sequences agree; the rest is dropped and counted."""
    if _shape(en) == _shape(zh):
        stats["pages aligned"] = stats.get("pages aligned", 0) + 1
        matched = list(zip(en, zh, strict=True))
    else:
        s_en, s_zh = _sections(en), _sections(zh)
        if len(s_en) != len(s_zh):
            stats["pages dropped (structure differs)"] = stats.get("pages dropped (structure differs)", 0) + 1
            return []
        matched = []
        for a, b in zip(s_en, s_zh, strict=True):
            key = "sections aligned" if _shape(a) == _shape(b) else "sections dropped (structure differs)"
            stats[key] = stats.get(key, 0) + 1
            if key == "sections aligned":
                matched.extend(zip(a, b, strict=True))
    return [(x, y) for (tag, x), (_, y) in matched if tag not in CODE_TAGS]


def docbook_pairs(src: Source, files: list[Path], stats: dict[str, int],
                  long: list[Pair] | None = None) -> list[Pair]:
    """Cleaned, filtered pairs of a DocBook source, page by page in sorted page order; the pairs dropped as too
    long are appended to `long` (sentence_pairs may still use their sentences)."""
    en_pages = bc.deb_files(files[0], src.en_dir, src.en_suffix)
    zh_pages = bc.deb_files(files[1], src.zh_dir, src.zh_suffix)
    zh_by_stem = {rel[: -len(src.zh_suffix)]: blob for rel, blob in zh_pages.items() if "/" not in rel}
    raw: list[Pair] = []
    for rel in sorted(en_pages):
        stem = rel[: -len(src.en_suffix)]
        if "/" in rel:
            continue
        if stem not in zh_by_stem:
            stats["pages dropped (no translation)"] = stats.get("pages dropped (no translation)", 0) + 1
            continue
        en = html_blocks(en_pages[rel].decode("utf-8"))
        zh = html_blocks(zh_by_stem[stem].decode("utf-8"))
        raw.extend(align_page(en, zh, stats))
    cleaned = ((FOOTNOTE.sub("", bc.clean(x)), FOOTNOTE.sub("", bc.clean(y, "zh"))) for x, y in raw)
    return _filtered(cleaned, stats, min_words=1, long=long)


# --------------------------------------------------------------------------- gettext catalogs -> pairs


def catalog_entries(wheel: Path, pattern: str) -> list[Pair]:
    """(msgid, msgstr) of every translated message of the matching .mo files, in sorted file order and
    catalog order; message contexts are dropped, plural messages give their singular and first form."""
    entries: list[Pair] = []
    with zipfile.ZipFile(wheel) as z:
        for name in sorted(n for n in z.namelist() if re.search(pattern, n)):
            catalog = gettext.GNUTranslations(io.BytesIO(z.read(name)))._catalog
            for key, msgstr in catalog.items():
                if isinstance(key, tuple):
                    if key[1] != 0:
                        continue
                    key = key[0]
                if key:  # "" is the header
                    entries.append((key.split("\x04")[-1], msgstr))
    return entries


def gettext_pairs(src: Source, files: list[Path], stats: dict[str, int]) -> list[Pair]:
    """Cleaned, filtered pairs of a gettext source: placeholders/accelerators out, English of 3+ words."""
    entries = catalog_entries(files[0], src.catalogs)
    stats["messages"] = len(entries)
    whole = [(m, t) for m, t in entries if not (has_placeholder(m) or has_placeholder(t))]
    if len(whole) < len(entries):
        stats["placeholder"] = len(entries) - len(whole)
    cleaned = ((bc.clean(strip_placeholders(m)), bc.clean(strip_placeholders(t), "zh")) for m, t in whole)
    return _filtered(cleaned, stats, min_words=3)


def _filtered(pairs, stats: dict[str, int], min_words: int, long: list[Pair] | None = None) -> list[Pair]:
    kept: list[Pair] = []
    seen: set[str] = set()
    for en, zh in pairs:
        reason = filter_pair(en, zh, min_words)
        if reason is None and en in seen:
            reason = "duplicate"
        if reason:
            stats[reason] = stats.get(reason, 0) + 1
            if reason == "length" and long is not None:
                long.append((en, zh))
            continue
        seen.add(en)
        kept.append((en, zh))
    return kept


# --------------------------------------------------------------------------- split and bundle


@dataclass
class Built:
    """One source's outcome."""

    src: Source
    versions: list[tuple[str, str]]
    splits: dict[str, list[Pair]]
    stats: dict[str, int] = field(default_factory=dict)
    licence: str = ""
    long: list[Pair] = field(default_factory=list)  # docbook: pairs dropped as too long (for sentence_pairs)


def _keys(pair: Pair) -> tuple[str, ...]:
    en, zh = pair
    return ("en:" + en, "en~" + bc.norm_key(en), "zh:" + zh, "zh~" + bc.norm_key(zh))


def eval_size(n: int) -> int:
    """Test (and valid) pairs for a source of n pairs: 10%, at most MAX_EVAL; at least MIN_EVAL, but never
    more than 20% (a small source keeps 60% for train)."""
    k = n // 10
    return min(MAX_EVAL, k) if k >= MIN_EVAL else min(MIN_EVAL, n // 5)


def build_source(src: Source, files: list[Path], taken: set[str]) -> Built:
    """Pairs of `src`, minus those overlapping earlier sources (`taken`, updated), split."""
    stats: dict[str, int] = {}
    long: list[Pair] = []
    if src.kind == "lohelp":
        pairs, lo_stats = bc.build(files[0], files[1], "zh")
        stats.update({k: v for k, v in lo_stats.items() if k not in ("aligned", "unaligned")})
        splits = bc.split_pairs(pairs)  # the en-zh split, unchanged
    else:
        pairs = docbook_pairs(src, files, stats, long) if src.kind == "docbook" else gettext_pairs(src, files, stats)
        fresh = [p for p in pairs if not taken.intersection(_keys(p))]
        if len(fresh) < len(pairs):
            stats["cross-source overlap"] = len(pairs) - len(fresh)
        k = eval_size(len(fresh))
        splits = bc.split_pairs(fresh, n_test=k, n_valid=k)
    for ps in splits.values():
        for p in ps:
            taken.update(_keys(p))
    bc.verify(splits)
    versions = [(p, bc.deb_version(f) if f.suffix == ".deb" else v) for (p, v), f in zip(src.packages, files)]
    return Built(src, versions, splits, stats, licence_text(src, files), long)


SENTENCE_PAIRS = "sentence pairs (train)"


def _sentence_keys(text: str, side: str) -> set[str]:
    """Exact and normalised keys of `text` and of each of its sentences (side "en" or "zh")."""
    parts = {text, *split_sentences(text)}
    return {f"{side}:{t}" for t in parts} | {f"{side}~{bc.norm_key(t)}" for t in parts}


def add_sentence_pairs(built: list[Built]) -> None:
    """More, shorter training pairs for the DocBook sources: a train paragraph, or one dropped as too long, whose
    English and Chinese have the same number of sentences (decoding/sentences.py's rule, the one `translate
    --set split_sentences=true` uses) gives each sentence as a pair of its own, appended to that source's train split.
    Kept only if it passes filter_pair, its English is new to the bundle, and neither sentence occurs, whole or
    as a sentence of a paragraph, in any source's test or valid split. Run after every source is split, so the
    paragraph-level splits (and so every test and valid file) are the same as without it."""
    held: set[str] = set()
    for b in built:
        for en, zh in b.splits["test"] + b.splits["valid"]:
            held |= _sentence_keys(en, "en") | _sentence_keys(zh, "zh")
    seen = {en for b in built for ps in b.splits.values() for en, _ in ps}
    for b in built:
        if b.src.kind != "docbook":
            continue
        added: list[Pair] = []
        for en, zh in b.splits["train"] + b.long:
            en_s, zh_s = split_sentences(en), split_sentences(zh)
            if len(en_s) < 2 or len(en_s) != len(zh_s):
                continue
            for x, y in zip(en_s, zh_s, strict=True):
                if x in seen or held.intersection(_keys((x, y))) or filter_pair(x, y) is not None:
                    continue
                seen.add(x)
                added.append((x, y))
        b.splits["train"] = b.splits["train"] + added
        b.stats[SENTENCE_PAIRS] = len(added)
        bc.verify(b.splits)


def merged(built: list[Built]) -> dict[str, list[Pair]]:
    """train/valid/test of all sources, concatenated in source order."""
    return {name: [p for b in built for p in b.splits[name]] for name in ("train", "valid", "test")}


def bundle_files(built: list[Built]) -> dict[str, list[Pair]]:
    """File name -> pairs, for every .tsv.gz of the bundle."""
    files = {f"{name}.tsv.gz": ps for name, ps in merged(built).items()}
    for b in built:
        for name in ("test", "valid"):
            files[f"{name}-{b.src.name}.tsv.gz"] = b.splits[name]
    return files


HOW = {
    "lohelp": "",
    "docbook": "Aligned by document structure: English and Chinese pages of the same name, block by block "
    "(paragraphs, headings, list items, table cells) where both pages have the same sequence of block tags, "
    "else section by section (cut at headings) where the sections' tag sequences agree; the other pages and "
    "sections are dropped. Code blocks give no pair; inline code (file, command names) is kept. A train "
    "paragraph, or one too long to keep, whose two sides have the same number of sentences also gives each "
    "sentence as a train pair (none that occurs in a test or valid file).",
    "gettext": "Aligned by msgid. Messages with placeholders (%(name)s, %s, %1, {0}, {name}) are dropped, "
    "accelerators (&File, _File, (&F)) removed; only English of at least 3 words is kept.",
}


def notice(built: list[Built]) -> str:
    """The NOTICE file: one section per source (packages, versions, licence, what was done)."""
    lines = [
        "English-Chinese (Simplified) software-documentation corpus",
        "==========================================================",
        "",
        "Files: train.tsv.gz, valid.tsv.gz, test.tsv.gz (all sources), test-<source>.tsv.gz and",
        "valid-<source>.tsv.gz (one source). Format: gzip, UTF-8, one pair per line",
        '"english<TAB>chinese", no header. Counts and dropped pairs: STATS.json.',
        "Built by scripts/build_software_corpus.py (docs/corpus.md). Each part keeps its own licence.",
        "",
        "Common processing: markup stripped, entities unescaped, whitespace collapsed; code blocks, command",
        "lines, untranslated and partly untranslated, empty, overlong and mis-aligned pairs dropped; English",
        "deduplicated; pairs sharing a sentence with an earlier source dropped; per source a deterministic",
        "SHA-256 group split (no RNG): no English or Chinese sentence of any test/valid file occurs in train.",
        "The text itself is unchanged otherwise.",
    ]
    for b in built:
        title = f"{b.src.name}"
        lines += ["", title, "-" * len(title)]
        lines += [f"  {p}  {v}" for p, v in b.versions]
        kind = "PyPI wheel" if _is_wheel_source(b.src) else "Debian 12 (bookworm) package"
        lines += [f"  ({kind}{'s' if len(b.versions) > 1 else ''})", f"Licence: {b.src.licence}",
                  f"  (from {b.src.licence_file} in {b.versions[b.src.licence_in][0]})"]
        lines += _wrap(b.src.note + " " + HOW[b.src.kind])
    lines += ["", "Left out", "--------"] + [line for k, v in LEFT_OUT.items() for line in _wrap(f"{k}: {v}")]
    return "\n".join(lines) + "\n"


def _wrap(text: str, width: int = 100) -> list[str]:
    out, line = [], ""
    for word in text.split():
        if line and len(line) + 1 + len(word) > width:
            out.append(line)
            line = word
        else:
            line = f"{line} {word}" if line else word
    return out + ([line] if line else [])


ALIGNMENT_KEYS = {"pages aligned", "sections aligned", "messages", SENTENCE_PAIRS}


def stats_json(built: list[Built], sizes: dict[str, int]) -> str:
    """STATS.json: pairs per source per split, dropped counts by reason, bundle bytes."""
    data = {
        "sources": {
            b.src.name: {
                "packages": {p: v for p, v in b.versions},
                "pairs": {name: len(b.splits[name]) for name in ("train", "valid", "test")},
                "aligned": {k: v for k, v in sorted(b.stats.items()) if k in ALIGNMENT_KEYS},
                "dropped": {k: v for k, v in sorted(b.stats.items()) if k not in ALIGNMENT_KEYS},
            }
            for b in built
        },
        "merged": {name: len(ps) for name, ps in merged(built).items()},
        "left_out": sorted(LEFT_OUT),
        "bytes": dict(sorted(sizes.items())),
        "bundle_bytes": sum(sizes.values()),
        "bundle_bytes_note": "all bundle files except STATS.json itself",
    }
    return json.dumps(data, indent=2, ensure_ascii=False, sort_keys=False) + "\n"


def write_bundle(built: list[Built], out: Path) -> None:
    """Write every bundle file into `out` (deterministic bytes)."""
    out.mkdir(parents=True, exist_ok=True)
    bc.verify(merged(built))
    sizes = {}
    for name, pairs in bundle_files(built).items():
        bc.write_tsv_gz(out / name, pairs)
        sizes[name] = (out / name).stat().st_size
    (out / "NOTICE").write_text(notice(built), encoding="utf-8")
    sizes["NOTICE"] = (out / "NOTICE").stat().st_size
    (out / "STATS.json").write_text(stats_json(built, sizes), encoding="utf-8")


# Sources also bundled as a corpus of their own, `data/corpora/<name>/` (train/valid/test exactly as in the
# software bundle), to fine-tune a model on one domain (README, "Fine-tuning"): `train init=models/en-zh
# --corpus gimp`.
OWN_CORPUS = ("gimp",)


def own_notice(b: Built) -> str:
    """NOTICE of a one-source corpus: the source's section of the software corpus' NOTICE."""
    title = f"{b.src.name}: English-Chinese (Simplified), one source of the software corpus"
    lines = [title, "=" * len(title), "",
             "Files: train.tsv.gz, valid.tsv.gz, test.tsv.gz: the same pairs as this source's splits of",
             "data/corpora/software (its valid-/test- files and its part of train.tsv.gz).",
             "Built by scripts/build_software_corpus.py; see data/corpora/software/NOTICE for the processing.", ""]
    lines += [f"  {p}  {v}" for p, v in b.versions]
    lines += [f"Licence: {b.src.licence}", f"  (from {b.src.licence_file} in {b.versions[b.src.licence_in][0]})"]
    lines += _wrap(b.src.note + " " + HOW[b.src.kind])
    return "\n".join(lines) + "\n"


def write_own_corpora(built: list[Built], parent: Path) -> None:
    """`parent/<name>/{train,valid,test}.tsv.gz` + NOTICE for each source of OWN_CORPUS."""
    for b in built:
        if b.src.name in OWN_CORPUS:
            out = parent / b.src.name
            out.mkdir(parents=True, exist_ok=True)
            for name in ("train", "valid", "test"):
                bc.write_tsv_gz(out / f"{name}.tsv.gz", b.splits[name])
            (out / "NOTICE").write_text(own_notice(b), encoding="utf-8")


def build_all(cache: Path) -> list[Built]:
    """Every source, in order."""
    taken: set[str] = set()
    built = []
    for src in SOURCES:
        b = build_source(src, fetch(src, cache), taken)
        counts = ", ".join(f"{k} {len(v)}" for k, v in b.splits.items())
        print(f"{src.name}: {counts}; dropped: {b.stats}", file=sys.stderr)
        built.append(b)
    add_sentence_pairs(built)
    for b in built:
        if SENTENCE_PAIRS in b.stats:
            print(f"{b.src.name}: {b.stats[SENTENCE_PAIRS]} sentence pairs added to train", file=sys.stderr)
    return built


def _digests(folder: Path) -> dict[str, str]:
    return {p.name: hashlib.sha256(p.read_bytes()).hexdigest() for p in sorted(folder.iterdir()) if p.is_file()}


def check(cache: Path, bundled: Path) -> int:
    """Rebuild into a temporary folder and compare sha256 of every file with `bundled`; print OK or the diff."""
    with tempfile.TemporaryDirectory(prefix="swcheck") as tmp:
        built = build_all(cache)
        write_bundle(built, Path(tmp) / "software")
        write_own_corpora(built, Path(tmp))
        new, old = {}, {}
        for name in ("software", *OWN_CORPUS):
            folder = bundled if name == "software" else bundled.parent / name
            new |= {f"{name}/{k}": v for k, v in _digests(Path(tmp) / name).items()}
            old |= {f"{name}/{k}": v for k, v in (_digests(folder) if folder.is_dir() else {}).items()}
    differ = sorted(n for n in set(new) | set(old) if new.get(n) != old.get(n))
    for name in differ:
        print(f"DIFFERS: {name} (bundled {old.get(name, 'missing')[:12]}, rebuilt {new.get(name, 'missing')[:12]})")
    if not differ:
        print(f"OK: {len(new)} files identical to {bundled}")
    return 1 if differ else 0


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--cache", type=Path, default=None, help="folder for the downloaded .debs/wheels (kept)")
    ap.add_argument("--out", type=Path, default=OUT, help=f"output folder (default {OUT})")
    ap.add_argument("--check", action="store_true", help="rebuild and compare sha256 with --out; write nothing")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="swsrc") as tmp:
        cache = args.cache or Path(tmp)
        cache.mkdir(parents=True, exist_ok=True)
        if args.check:
            return check(cache, args.out)
        built = build_all(cache)
        write_bundle(built, args.out)
        write_own_corpora(built, args.out.parent)
    print((args.out / "STATS.json").read_text(encoding="utf-8"))
    return 0


if __name__ == "__main__":
    sys.exit(main())

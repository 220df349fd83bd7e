#!/usr/bin/env python3
"""Build the bundled parallel corpus from Debian's LibreOffice offline-help packages.

Source
------
Debian ships the LibreOffice offline help per language (``libreoffice-help-en-us``,
``libreoffice-help-zh-cn``, ``libreoffice-help-de``, ...; MPL-2.0, The Document
Foundation / LibreOffice contributors).  Every package contains the same tree of
generated HTML pages, ``usr/share/libreoffice/help/<LANG>/text/**/*.html``, and every
help paragraph / heading is a ``<p>`` or ``<h1>``..``<h6>`` element whose ``id``
attribute (``par_id3153527``, ``hd_id3145136``, ...) is identical in all languages.
Aligning the English and target-language pages on (relative file path, element id,
occurrence) therefore gives real sentence/paragraph-level translations.

Pipeline
--------
1. ``apt-get download`` the two packages into a temporary directory (or use
   ``--deb-dir`` with already downloaded ``.deb`` files).
2. Read the HTML pages straight out of the ``.deb`` (an ``ar`` archive holding
   ``data.tar.{xz,gz,bz2}``; ``dpkg-deb --fsys-tarfile`` is the fallback for other
   compressions) -- nothing is installed.
3. Parse every page with :mod:`html.parser` into a small tree and take the text of
   every ``<p>``/``<h*>`` with an ``id`` inside ``<div id="DisplayArea">``.  Inline
   "switches" (``<span class="switchinline">``: text that differs for macOS/Windows
   or per application) keep only their default case (first case when there is no
   default), exactly like the help viewer does; code (``<pre>``, ``<code>``),
   scripts and images are dropped.  Entities are unescaped, whitespace collapsed,
   ``%PRODUCTNAME``/``$[officename]`` become ``LibreOffice`` on both sides.
4. Filter: empty, untranslated (target == source, or a Chinese side without Chinese
   characters / mostly made of Latin text), too long/short, length-ratio outliers,
   leftover markup or placeholders.  Deduplicate on the English side (keep first,
   in sorted-path / document order).
5. Split deterministically, without any RNG: pairs that share an English or a target
   sentence (after light normalisation: case, whitespace, trailing punctuation) are
   grouped; each group is keyed by the smallest SHA-256 of its English sentences;
   groups are taken in key order into test (~1,000 pairs) and valid (~1,000 pairs),
   the rest is train.  Whole groups move together, so no English and no target
   sentence of test/valid appears in train (verified at the end, exact and
   normalised).
6. Write ``train.tsv.gz``, ``valid.tsv.gz``, ``test.tsv.gz`` (``english<TAB>target``,
   UTF-8, no header) as deterministic gzip (mtime 0, no file name), so re-running
   gives byte-identical files.

Usage
-----
    python scripts/build_corpus.py                      # en-zh -> src/scratchformer/data/corpora/en-zh
    python scripts/build_corpus.py --deb-dir /tmp/lohelp
    python scripts/build_corpus.py --langs en-de --out /tmp/en-de

Standard library only (plus the ``apt-get`` client for downloading).
"""

from __future__ import annotations

import argparse
import gzip
import hashlib
import html
import io
import re
import subprocess
import sys
import tarfile
import tempfile
import unicodedata
from dataclasses import dataclass
from html.parser import HTMLParser
from pathlib import Path

REPO_ROOT = Path(__file__).resolve().parents[1]
DEFAULT_OUT = REPO_ROOT / "src" / "scratchformer" / "data" / "corpora"

# language code -> (Debian package, directory name inside usr/share/libreoffice/help)
LANGUAGES = {
    "en": ("libreoffice-help-en-us", "en-US"),
    "zh": ("libreoffice-help-zh-cn", "zh-CN"),
    "de": ("libreoffice-help-de", "de"),
}

HELP_PREFIX = "usr/share/libreoffice/help/"

N_TEST = 1000
N_VALID = 1000

# --------------------------------------------------------------------------- .deb reading


def deb_version(deb: Path) -> str:
    """Version string of a .deb, from its control file (falls back to the file name)."""
    try:
        control = _read_control(deb)
        m = re.search(r"^Version:\s*(\S+)", control, re.M)
        if m:
            return m.group(1)
    except Exception:  # noqa: BLE001 - informative only
        pass
    parts = deb.name.split("_")
    return parts[1].replace("%3a", ":") if len(parts) >= 3 else "unknown"


def _ar_members(deb: Path) -> dict[str, bytes]:
    """Members of a Debian ``ar`` archive (tiny: control.tar.*, data.tar.*)."""
    data = deb.read_bytes()
    if not data.startswith(b"!<arch>\n"):
        raise ValueError(f"{deb}: not an ar archive")
    pos, out = 8, {}
    while pos + 60 <= len(data):
        header = data[pos : pos + 60]
        name = header[:16].decode().strip().rstrip("/")
        size = int(header[48:58].decode().strip())
        pos += 60
        out[name] = data[pos : pos + size]
        pos += size + (size & 1)
    return out


def _open_tar(name: str, blob: bytes) -> tarfile.TarFile | None:
    if name.endswith((".xz", ".gz", ".bz2")) or name.endswith(".tar"):
        return tarfile.open(fileobj=io.BytesIO(blob), mode="r:*")
    return None


def _read_control(deb: Path) -> str:
    members = _ar_members(deb)
    for name, blob in members.items():
        if name.startswith("control.tar"):
            tar = _open_tar(name, blob)
            if tar is None:
                out = subprocess.run(["dpkg-deb", "-f", str(deb)], capture_output=True, check=True)
                return out.stdout.decode()
            for m in tar.getmembers():
                if m.name.lstrip("./") == "control":
                    return tar.extractfile(m).read().decode()
    raise ValueError(f"{deb}: no control file")


def _data_tar(deb: Path) -> tarfile.TarFile:
    """The ``data.tar.*`` member of a .deb, opened (dpkg-deb decompresses what tarfile cannot)."""
    for name, blob in _ar_members(deb).items():
        if name.startswith("data.tar"):
            tar = _open_tar(name, blob)
            if tar is None:  # e.g. zstd: let dpkg-deb decompress
                raw = subprocess.run(
                    ["dpkg-deb", "--fsys-tarfile", str(deb)], capture_output=True, check=True
                ).stdout
                tar = tarfile.open(fileobj=io.BytesIO(raw), mode="r:")
            return tar
    raise ValueError(f"{deb}: no data.tar member")


def deb_files(deb: Path, prefix: str, suffix: str = "") -> dict[str, bytes]:
    """Map path relative to `prefix` -> bytes, for every regular file under `prefix` ending in `suffix`."""
    tar = _data_tar(deb)
    files = {}
    for m in tar.getmembers():
        path = m.name.lstrip("./")
        if m.isfile() and path.startswith(prefix) and path.endswith(suffix):
            files[path[len(prefix) :]] = tar.extractfile(m).read()
    return files


def deb_help_pages(deb: Path, lang_dir: str) -> dict[str, str]:
    """Map relative path (``text/.../x.html``) -> HTML text, read from the .deb."""
    files = deb_files(deb, HELP_PREFIX + lang_dir + "/", ".html")
    return {rel: blob.decode("utf-8") for rel, blob in files.items()}


def find_or_download(package: str, deb_dir: Path | None, tmp: Path) -> Path:
    """Return the .deb of ``package``: from ``deb_dir`` if given, else ``apt-get download``."""
    if deb_dir is not None:
        debs = sorted(deb_dir.glob(f"{package}_*.deb"))
        if not debs:
            sys.exit(f"no {package}_*.deb in {deb_dir}")
        return debs[-1]
    cmd = ["apt-get", "download", package]
    if subprocess.run(cmd, cwd=tmp).returncode != 0:
        print("apt-get download failed; running apt-get update and retrying", file=sys.stderr)
        subprocess.run(["apt-get", "update"], check=False)
        subprocess.run(cmd, cwd=tmp, check=True)
    return sorted(tmp.glob(f"{package}_*.deb"))[-1]


# --------------------------------------------------------------------------- HTML -> units

VOID = {"area", "base", "br", "col", "embed", "hr", "img", "input", "link", "meta", "source", "track", "wbr"}
SKIP_TAGS = {"script", "style", "noscript", "img", "pre", "code", "button", "input", "nav"}
UNIT_TAGS = {"p", "h1", "h2", "h3", "h4", "h5", "h6", "h"}
BLOCKISH = {"br", "p", "div", "li", "td", "th", "tr", "table", "ul", "ol"} | UNIT_TAGS


@dataclass
class Node:
    tag: str
    attrs: dict
    children: list  # of Node | str


class TreeBuilder(HTMLParser):
    """Builds a tolerant element tree (void tags self-close, stray end tags ignored)."""

    def __init__(self):
        super().__init__(convert_charrefs=True)
        self.root = Node("#root", {}, [])
        self.stack = [self.root]

    def handle_starttag(self, tag, attrs):
        node = Node(tag, {k: (v or "") for k, v in attrs}, [])
        self.stack[-1].children.append(node)
        if tag not in VOID:
            self.stack.append(node)

    def handle_startendtag(self, tag, attrs):
        self.stack[-1].children.append(Node(tag, {k: (v or "") for k, v in attrs}, []))

    def handle_endtag(self, tag):
        for i in range(len(self.stack) - 1, 0, -1):
            if self.stack[i].tag == tag:
                del self.stack[i:]
                return

    def handle_data(self, data):
        self.stack[-1].children.append(data)


def _classes(node: Node) -> set[str]:
    return set(node.attrs.get("class", "").split())


def _is_unit(node: Node) -> bool:
    return node.tag in UNIT_TAGS and bool(node.attrs.get("id"))


def _switch_case(node: Node) -> list:
    """Children to render for an inline switch: the default case, else the first case."""
    cases = [c for c in node.children if isinstance(c, Node)]
    for c in cases:
        if c.attrs.get("id", "").startswith("default"):
            return [c]
    return cases[:1]


def _text(node: Node, out: list[str], nested: list[Node]) -> None:
    for child in node.children:
        if isinstance(child, str):
            out.append(child)
            continue
        if child.tag in SKIP_TAGS:
            if child.tag == "code" or child.tag == "pre":
                out.append("\x00CODE\x00")  # marks the unit as containing code
            continue
        if _is_unit(child):  # malformed nesting: becomes its own unit
            nested.append(child)
            continue
        if "switchinline" in _classes(child):
            for case in _switch_case(child):
                _text(case, out, nested)
            continue
        if child.tag in BLOCKISH:
            out.append(" ")
        _text(child, out, nested)
        if child.tag in BLOCKISH:
            out.append(" ")


def _find_display_area(node: Node) -> Node | None:
    todo = [node]
    while todo:
        n = todo.pop()
        if n.attrs.get("id") == "DisplayArea":
            return n
        todo.extend(reversed([c for c in n.children if isinstance(c, Node)]))
    return None


def extract_units(page: str) -> list[tuple[str, str]]:
    """(element id, raw text) for every id-carrying paragraph/heading, in document order."""
    tb = TreeBuilder()
    tb.feed(page)
    tb.close()
    area = _find_display_area(tb.root)
    if area is None:
        return []
    units: list[tuple[str, str]] = []

    def walk(n: Node, in_code: bool) -> None:
        for c in n.children:
            if not isinstance(c, Node) or c.tag in ("script", "style"):
                continue
            code = in_code or c.tag in ("pre", "code")
            if _is_unit(c):
                out: list[str] = []
                nested: list[Node] = []
                _text(c, out, nested)
                text = "".join(out)
                units.append((c.attrs["id"], "\x00CODE\x00" + text if code else text))
                for m in nested:
                    walk(Node("#wrap", {}, [m]), code)
            else:
                walk(c, code)

    walk(area, False)
    return units


# --------------------------------------------------------------------------- cleaning / filters

PLACEHOLDERS = [
    (re.compile(r"%PRODUCTNAME|\$\[officename\]"), "LibreOffice"),
    (re.compile(r"%PRODUCTVERSION|\$\[officeversion\]"), "7"),
]
WS = re.compile(r"\s+")
HAN = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff]")
EN_FUNCTION_WORDS = re.compile(
    r"\b(?:the|is|are|was|an|of|to|and|in|for|with|you|your|this|that|be|can|if|on|by|from|or|as|it|"
    r"not|will|which|when|into|at|has|have)\b"
)
EN_ONLY_WORDS = re.compile(r"\b(?:the|is|are|of|you|your|this|that|which|with|for|and|to)\b")
BAD = re.compile(r"<[a-zA-Z/!]|&[a-z]+;|&#\d+;|%[A-Z]{4,}|\$\[|\$[a-z]+\{|\x00|\ufffd|\t")
_CJK = r"[\u3000-\u303f\u3400-\u4dbf\u4e00-\u9fff\uff00-\uffef]"  # CJK punctuation, Han, full-width
CJK_GAP = re.compile(rf"(?<={_CJK}) (?={_CJK})")


def clean(text: str, lang: str = "en") -> str:
    text = html.unescape(text)  # convert_charrefs already did most of it; idempotent otherwise
    text = unicodedata.normalize("NFC", text)
    for pat, repl in PLACEHOLDERS:
        text = pat.sub(repl, text)
    text = text.replace("\u00a0", " ").replace("\u200b", "").replace("\ufeff", "")
    text = WS.sub(" ", text).strip()
    # space before punctuation left by dropped inline elements ("click  .")
    text = re.sub(r" ([.,;:!?])(?=\s|$)", r"\1", text)
    if lang == "zh":  # a space between two CJK characters is always a markup artefact
        text = CJK_GAP.sub("", text)
    return text


def norm_key(text: str) -> str:
    """Loose key for leakage checks: case-, width-, whitespace-, trailing-punct-insensitive."""
    t = unicodedata.normalize("NFKC", text).casefold()
    t = re.sub(r"\s+", "", t)
    return t.rstrip(".。:：;；!！?？,，")


@dataclass(frozen=True)
class Limits:
    min_en_words: int = 1
    max_en_words: int = 60
    max_tgt_len: int = 120  # Chinese: characters; other languages: words
    tgt_len_unit: str = "chars"


LIMITS = {
    "zh": Limits(max_tgt_len=120, tgt_len_unit="chars"),
    "de": Limits(max_tgt_len=80, tgt_len_unit="words"),
}


def keep_pair(en: str, tgt: str, lang: str) -> str | None:
    """None if the pair is kept, else the reason it is dropped."""
    if not en or not tgt:
        return "empty"
    if BAD.search(en) or BAD.search(tgt):
        return "markup/code"
    if en == tgt or norm_key(en) == norm_key(tgt):
        return "untranslated"
    if not re.search(r"[A-Za-z]", en):
        return "no-letters"
    lim = LIMITS[lang]
    n_en = len(en.split())
    if n_en < lim.min_en_words or n_en > lim.max_en_words:
        return "length"
    if lim.tgt_len_unit == "chars":
        n_tgt = len(tgt)
    else:
        n_tgt = len(tgt.split())
    if n_tgt > lim.max_tgt_len:
        return "length"
    if lang == "zh":
        n_han = len(HAN.findall(tgt))
        if n_han == 0:
            return "untranslated"
        # Latin words left in the Chinese side (UI, function, product names) are normal;
        # English *function words* there mean a sentence was left untranslated.
        if len(EN_FUNCTION_WORDS.findall(tgt)) >= 2:
            return "untranslated"
        # Han characters per letter of the English words that the Chinese side does not
        # copy verbatim (function names, UI names, numbers are shared): ~0.2-0.5 for a
        # real translation; far outside means the paragraph ids were mis-aligned.
        tgt_lower = tgt.lower()
        letters = sum(len(w) for w in re.findall(r"[A-Za-z]+", en) if w.lower() not in tgt_lower)
        if letters >= 15 and not (0.1 <= n_han / letters <= 0.9):
            return "ratio"
    else:
        # English-only function words in a German/other Latin-script side: left untranslated
        if len(EN_ONLY_WORDS.findall(tgt)) >= 3:
            return "untranslated"
        ratio = len(tgt) / max(len(en), 1)
        if len(en) >= 20 and not (0.5 <= ratio <= 2.5):
            return "ratio"
    return None


# --------------------------------------------------------------------------- split


def sha(text: str) -> str:
    return hashlib.sha256(text.encode("utf-8")).hexdigest()


def split_pairs(
    pairs: list[tuple[str, str]], n_test: int = N_TEST, n_valid: int = N_VALID
) -> dict[str, list[tuple[str, str]]]:
    """Deterministic leakage-free split (see module docstring); test/valid get whole groups up to ~n_test/n_valid."""
    parent = list(range(len(pairs)))

    def find(i: int) -> int:
        while parent[i] != i:
            parent[i] = parent[parent[i]]
            i = parent[i]
        return i

    first_seen: dict[str, int] = {}
    for i, (en, tgt) in enumerate(pairs):
        for key in ("en:" + norm_key(en), "tgt:" + norm_key(tgt), "tgtx:" + tgt):
            j = first_seen.setdefault(key, i)
            if j != i:
                parent[find(i)] = find(j)
    groups: dict[int, list[int]] = {}
    for i in range(len(pairs)):
        groups.setdefault(find(i), []).append(i)
    ordered = sorted(groups.values(), key=lambda g: min(sha(pairs[i][0]) for i in g))

    assign = ["train"] * len(pairs)
    got_test = got_valid = 0
    for g in ordered:
        if got_test < n_test:
            split, got_test = "test", got_test + len(g)
        elif got_valid < n_valid:
            split, got_valid = "valid", got_valid + len(g)
        else:
            break
        for i in g:
            assign[i] = split
    out: dict[str, list[tuple[str, str]]] = {"train": [], "valid": [], "test": []}
    for i, p in enumerate(pairs):  # keep source order inside each split
        out[assign[i]].append(p)
    return out


def verify(splits: dict[str, list[tuple[str, str]]]) -> None:
    """Assert the split is clean: no sentence of test/valid (either side) elsewhere."""
    for side in (0, 1):
        for keyf in (lambda s: s, norm_key):
            seen = {name: {keyf(p[side]) for p in ps} for name, ps in splits.items()}
            assert not seen["test"] & seen["train"], "test/train leak"
            assert not seen["valid"] & seen["train"], "valid/train leak"
            assert not seen["test"] & seen["valid"], "test/valid leak"
    for ps in splits.values():
        for en, tgt in ps:
            assert en and tgt and not any(c in en + tgt for c in "\t\n\r"), (en, tgt)
    all_en = [p[0] for ps in splits.values() for p in ps]
    assert len(all_en) == len(set(all_en)), "duplicate English sentence"


# --------------------------------------------------------------------------- main


def write_tsv_gz(path: Path, pairs: list[tuple[str, str]]) -> None:
    data = "".join(f"{en}\t{tgt}\n" for en, tgt in pairs).encode("utf-8")
    buf = io.BytesIO()
    with gzip.GzipFile(filename="", mode="wb", fileobj=buf, compresslevel=9, mtime=0) as gz:
        gz.write(data)
    path.write_bytes(buf.getvalue())


def build(deb_src: Path, deb_tgt: Path, tgt_lang: str) -> tuple[list[tuple[str, str]], dict[str, int]]:
    src_pages = deb_help_pages(deb_src, LANGUAGES["en"][1])
    tgt_pages = deb_help_pages(deb_tgt, LANGUAGES[tgt_lang][1])
    stats: dict[str, int] = {"aligned": 0, "unaligned": 0}
    pairs: list[tuple[str, str]] = []
    seen_en: set[str] = set()
    for rel in sorted(src_pages):
        if rel not in tgt_pages:
            stats["unaligned"] += 1
            continue
        tgt_units: dict[tuple[str, int], str] = {}
        counts: dict[str, int] = {}
        for uid, text in extract_units(tgt_pages[rel]):
            k = counts[uid] = counts.get(uid, -1) + 1
            tgt_units[(uid, k)] = text
        counts = {}
        for uid, text in extract_units(src_pages[rel]):
            k = counts[uid] = counts.get(uid, -1) + 1
            if (uid, k) not in tgt_units:
                stats["unaligned"] += 1
                continue
            stats["aligned"] += 1
            en, tgt = clean(text), clean(tgt_units[(uid, k)], tgt_lang)
            reason = keep_pair(en, tgt, tgt_lang)
            if reason is None and en in seen_en:
                reason = "duplicate"
            if reason:
                stats[reason] = stats.get(reason, 0) + 1
                continue
            seen_en.add(en)
            pairs.append((en, tgt))
    return pairs, stats


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--langs", default="en-zh", choices=["en-zh", "en-de"])
    ap.add_argument("--deb-dir", type=Path, default=None, help="directory with already downloaded .debs")
    ap.add_argument("--out", type=Path, default=None, help="output dir (default: bundled corpora/<langs>)")
    ap.add_argument("--samples", type=int, default=5)
    args = ap.parse_args(argv)

    tgt_lang = args.langs.split("-")[1]
    out = args.out or DEFAULT_OUT / args.langs
    with tempfile.TemporaryDirectory(prefix="lohelp") as tmp:
        debs = [find_or_download(LANGUAGES[lang][0], args.deb_dir, Path(tmp)) for lang in ("en", tgt_lang)]
        for lang, deb in zip(("en", tgt_lang), debs, strict=True):
            print(f"{LANGUAGES[lang][0]} {deb_version(deb)}  ({deb.name})")
        pairs, stats = build(debs[0], debs[1], tgt_lang)

    print("alignment/filter stats:", ", ".join(f"{k}={v}" for k, v in sorted(stats.items())))
    splits = split_pairs(pairs)
    verify(splits)
    out.mkdir(parents=True, exist_ok=True)
    for name in ("train", "valid", "test"):
        write_tsv_gz(out / f"{name}.tsv.gz", splits[name])
        size = (out / f"{name}.tsv.gz").stat().st_size
        print(f"{name:5s} {len(splits[name]):6d} pairs  {size / 1024:8.1f} KiB  {out / (name + '.tsv.gz')}")
    print(f"total {len(pairs)} pairs; split verified leakage-free")
    for name in ("test", "train") if args.samples > 0 else ():
        ps = splits[name]
        step = max(len(ps) // max(args.samples, 1), 1)
        print(f"--- {name} samples")
        for en, tgt in ps[::step][: args.samples]:
            print(f"  {en}\n    -> {tgt}")
    return 0


if __name__ == "__main__":
    sys.exit(main())

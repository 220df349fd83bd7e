#!/usr/bin/env python3
"""Build the bundled labelled set `lo-module`: which LibreOffice help module an English sentence comes from.

Task
----
Each English sentence of the bundled en-zh corpus comes from one page of the LibreOffice offline help, and
the page's path names the module it documents (``text/scalc/...`` = Calc, ``text/sbasic/...`` = Basic, ...).
The label is that module, recovered from the help package itself, not guessed:

    calc  writer  basic  impress-draw  math  chart

``impress-draw`` merges ``simpress`` and ``sdraw`` (Draw's few pages describe the same drawing tools).
Dropped: sentences from ``text/shared`` (help common to every application: no module to learn),
from ``text/sdatabase`` (37 sentences, too few), and sentences that occur (after the corpus' cleaning) on
pages of more than one module (ambiguous: "Click OK.").

Split
-----
The en-zh split is kept: a sentence of en-zh train/valid/test goes to lo-module train/valid/test. So a model
pre-trained on en-zh train (e.g. a masked LM) has never seen a valid or test sentence of this set.
Order inside a split is the en-zh order; no RNG, gzip with mtime 0: byte-identical on every run.

Format: ``text<TAB>label``, UTF-8, no header, ``{train,valid,test}.tsv.gz``.

Usage (needs the same Debian package as scripts/build_corpus.py; ``apt-get download`` when not given):

    python scripts/build_module_corpus.py --deb-dir /tmp/lohelp
"""

from __future__ import annotations

import argparse
import gzip
import sys
import tempfile
from collections import Counter, defaultdict
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parent))
import build_corpus as bc  # noqa: E402  (the en-zh pipeline: .deb reading, HTML units, cleaning)

CORPORA = bc.DEFAULT_OUT
LABELS = {"scalc": "calc", "swriter": "writer", "sbasic": "basic", "simpress": "impress-draw",
          "sdraw": "impress-draw", "smath": "math", "schart": "chart"}


def english_modules(deb: Path) -> dict[str, set[str]]:
    """Cleaned English unit text -> the help modules (``scalc``, ``shared``, ...) whose pages hold it."""
    modules: dict[str, set[str]] = defaultdict(set)
    for rel, page in bc.deb_help_pages(deb, bc.LANGUAGES["en"][1]).items():
        parts = rel.split("/")  # text/<module>/...
        if len(parts) < 3 or parts[0] != "text":
            continue
        for _, text in bc.extract_units(page):
            modules[bc.clean(text)].add(parts[1])
    return modules


def label_split(split: str, modules: dict[str, set[str]], stats: Counter) -> list[tuple[str, str]]:
    rows = []
    with gzip.open(CORPORA / "en-zh" / f"{split}.tsv.gz", "rt", encoding="utf-8") as f:
        for line in f:
            en = line.rstrip("\n").split("\t")[0]
            found = modules.get(en, set())
            if len(found) != 1:
                stats["ambiguous" if found else "not-found"] += 1
                continue
            module = next(iter(found))
            if module not in LABELS:
                stats[f"dropped-{module}"] += 1
                continue
            rows.append((en, LABELS[module]))
    return rows


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--deb-dir", type=Path, default=None, help="directory with libreoffice-help-en-us_*.deb")
    ap.add_argument("--out", type=Path, default=CORPORA / "lo-module")
    args = ap.parse_args(argv)
    with tempfile.TemporaryDirectory(prefix="lohelp") as tmp:
        deb = bc.find_or_download(bc.LANGUAGES["en"][0], args.deb_dir, Path(tmp))
        print(f"{deb.name} ({bc.deb_version(deb)})")
        modules = english_modules(deb)
    stats: Counter = Counter()
    args.out.mkdir(parents=True, exist_ok=True)
    for split in ("train", "valid", "test"):
        rows = label_split(split, modules, stats)
        bc.write_tsv_gz(args.out / f"{split}.tsv.gz", rows)
        counts = Counter(label for _, label in rows)
        top = counts.most_common(1)[0]
        print(f"{split:5s} {len(rows):6d}  " + "  ".join(f"{k}={v}" for k, v in sorted(counts.items()))
              + f"  majority {top[0]} {top[1] / len(rows):.3f}")
    print("dropped:", ", ".join(f"{k}={v}" for k, v in sorted(stats.items())))
    return 0


if __name__ == "__main__":
    sys.exit(main())

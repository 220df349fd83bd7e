"""Corpora: read parallel sentence pairs (translation) or plain lines (language models) from disk.

A `source` is one of
- a bundled corpus name, a folder under ``data/corpora/`` (``en-zh``: ``{split}.tsv.gz``; ``toy``: a
  single ``train.tsv`` that serves every split: a corpus that ships only ``train`` uses it for all);
- a TSV file (``.tsv`` or ``.tsv.gz``), one ``source<TAB>target`` pair per line (``split`` ignored);
- ``"SRC_FILE,TGT_FILE"``: two aligned text files, one sentence per line.

A corpus of one file (a TSV, "SRC_FILE,TGT_FILE" or a text file) has no valid and test split of its own. With
``holdout="hash"`` (what `train` records for such a corpus) its rows are split by a hash of the source sentence
(`held_out`): a fixed share goes to valid, as much to test, the rest to train, the same on every machine and run;
``holdout="none"`` serves the whole file as every split (a bundled corpus always brings its own splits).

Bad lines are reported as ``file:line: reason``; ``on_error="stop"`` raises `CorpusError`,
``on_error="skip"`` drops them with one summary warning. Blank lines are ignored silently.
"""

from __future__ import annotations

import hashlib
import re
import warnings
from collections.abc import Callable, Iterable, Iterator
from pathlib import Path
from typing import Any

from scratchformer.config import regular_file
from scratchformer.data.reading import CorpusError, decode_lines, read_lines  # noqa: F401 (decode_lines: for cli/)
from scratchformer.errors import N_, ScratchformerWarning, Text

CORPORA_DIR = Path(__file__).parent / "corpora"
ON_ERROR = ("stop", "skip")
SPLITS = ("train", "valid", "test")  # what a corpus of one train file serves; other names must exist as files
SIDES = ("src", "tgt", "both")
_SUFFIXES = (".tsv.gz", ".tsv")
HOLDOUTS = ("hash", "none")
# `held_out`: each of valid and test gets this share of a file's distinct source sentences, within these bounds;
# a file with fewer distinct sources than HOLDOUT_LEAST is not split (its scores are then training scores)
HOLDOUT_SHARE, HOLDOUT_MAX, HOLDOUT_LEAST = 0.05, 2000, 20
# the language pair of the bundled corpora whose name does not spell it (en-zh does)
BUNDLED_LANGUAGES = {"software": ("en", "zh"), "gimp": ("en", "zh"), "toy": ("en", "zh")}


class CorpusWarning(ScratchformerWarning):
    """Bad lines were skipped."""


def bundled_corpora() -> list[str]:
    """Names of the corpora shipped with the package (folders holding at least one .tsv/.tsv.gz)."""
    if not CORPORA_DIR.is_dir():
        return []
    return sorted(d.name for d in CORPORA_DIR.iterdir() if d.is_dir() and any(_split_files(d)))


def corpus_languages(corpus: str | None) -> tuple[str, str] | None:
    """(source, target) language codes of a corpus: a bundled one's, or a name like `en-zh`; else None."""
    if corpus in BUNDLED_LANGUAGES:
        return BUNDLED_LANGUAGES[corpus]
    found = re.fullmatch(r"([a-z]{2,3})-([a-z]{2,3})", corpus or "")
    return (found[1], found[2]) if found else None


def _split_files(folder: Path) -> Iterator[Path]:
    return (p for p in folder.iterdir() if p.is_file() and p.name.endswith(_SUFFIXES))


def _split_name(path: Path) -> str:
    return next(path.name[: -len(s)] for s in _SUFFIXES if path.name.endswith(s))


def bundled_path(name: str, split: str = "train") -> Path:
    """File of `split` in bundled corpus `name`."""
    folder = CORPORA_DIR / name
    if name not in bundled_corpora():
        raise _not_found(name)
    for suffix in _SUFFIXES:
        if (folder / f"{split}{suffix}").is_file():
            return folder / f"{split}{suffix}"
    splits = sorted(_split_name(p) for p in _split_files(folder))
    if splits == ["train"] and split in SPLITS:
        return bundled_path(name, "train")
    if splits == ["train"]:
        raise CorpusError("bundled corpus {name!r} has no split {split!r}; it has one file, train, that serves the "
                          "splits {splits}", name=name, split=split, splits=", ".join(SPLITS))
    raise CorpusError("bundled corpus {name!r} has no split {split!r}; it has: {splits}", name=name, split=split,
                      splits=", ".join(splits))


def _not_found(source: str) -> CorpusError:
    names = ", ".join(bundled_corpora())
    if not names:
        return CorpusError(N_("corpus {source!r} not found: not a file, not 'SRC_FILE,TGT_FILE', not a bundled corpus "
                              "(bundled: none installed)"), source=source)
    return CorpusError(N_("corpus {source!r} not found: not a file, not 'SRC_FILE,TGT_FILE', not a bundled corpus "
                          "(bundled: {names})"), source=source, names=names)


def _read_lines(path: Path) -> list[str]:
    return read_lines(path)  # reading.py: in chunks, within the bounds it states (a gzip bomb is refused early)


_SAID: set[str] = set()  # the skipped-lines warnings said in this process: a file read again is not said again


class _BadLines:
    """Collects malformed lines; raises at the first one or warns once at the end (once per process for the same
    file and lines: train reads its corpus, then its test report reads it again)."""

    def __init__(self, name: str, on_error: str) -> None:
        if on_error not in ON_ERROR:
            raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
        self.name, self.on_error, self.lines = name, on_error, []

    def report(self, lineno: int, reason: Text) -> None:
        if self.on_error == "stop":
            raise CorpusError(N_("{name}:{lineno}: {reason} (use on_error=skip to skip bad lines)"), name=self.name,
                              lineno=lineno, reason=reason)
        self.lines.append(lineno)

    def summarize(self) -> None:
        if self.lines:
            first = ", ".join(map(str, self.lines[:5])) + (", ..." if len(self.lines) > 5 else "")
            warning = CorpusWarning(N_("{name}: skipped {n} malformed line(s) (lines {first})"), name=self.name,
                                    n=len(self.lines), first=first)
            if str(warning) not in _SAID:
                _SAID.add(str(warning))
                warnings.warn(warning, stacklevel=3)


def _check_pair(src: str, tgt: str) -> Text | None:
    if not src:
        return Text(N_("empty source side"))
    if not tgt:
        return Text(N_("empty target side"))
    return None


def read_tsv(path: str | Path, on_error: str = "stop", name: str | None = None) -> list[tuple[str, str]]:
    """Pairs from a ``source<TAB>target`` file; `name` is how messages call the file."""
    path = Path(path)
    bad = _BadLines(name or str(path), on_error)

    def rows() -> Iterator[tuple[int, str, str]]:
        for lineno, line in enumerate(_read_lines(path), start=1):
            if not line.strip():
                continue
            fields = line.split("\t")
            if len(fields) != 2:
                bad.report(lineno, Text(N_("expected 2 tab-separated fields, found {n}"), n=len(fields)))
                continue
            yield lineno, fields[0].strip(), fields[1].strip()

    return _checked_pairs(rows(), bad)


def read_parallel(
    src_path: str | Path, tgt_path: str | Path, on_error: str = "stop"
) -> list[tuple[str, str]]:
    """Pairs from two aligned files, line i of one translating line i of the other."""
    src_path, tgt_path = Path(src_path), Path(tgt_path)
    src_lines, tgt_lines = _read_lines(src_path), _read_lines(tgt_path)
    if len(src_lines) != len(tgt_lines):
        raise CorpusError(
            N_("{src_path} has {n_src_lines} lines but {tgt_path} has {n_tgt_lines}; the two files must be aligned "
               "line by line"), src_path=src_path, n_src_lines=len(src_lines), tgt_path=tgt_path,
            n_tgt_lines=len(tgt_lines)
        )
    lines = enumerate(zip(src_lines, tgt_lines, strict=True), start=1)
    rows = ((i, s.strip(), t.strip()) for i, (s, t) in lines if s.strip() or t.strip())  # blank on both: skipped
    return _checked_pairs(rows, _BadLines(f"{src_path},{tgt_path}", on_error))


def _checked_pairs(rows: Iterable[tuple[int, str, str]], bad: _BadLines) -> list[tuple[str, str]]:
    """The (source, target) of each (line number, source, target) row that passes `_check_pair`; the others go
    to `bad` (an error, or a warning with the count once the rows are read)."""
    pairs: list[tuple[str, str]] = []
    for lineno, src, tgt in rows:
        reason = _check_pair(src, tgt)
        if reason:
            bad.report(lineno, reason)
            continue
        pairs.append((src, tgt))
    bad.summarize()
    return pairs


def _check_split(source: str | Path, split: str) -> None:
    """An unknown split name is an error, not a silent read of the train data: a bundled corpus may hold extra
    split files, any other corpus serves only the usual names (its one file, for all of them)."""
    if split in SPLITS:
        return
    name = str(source)
    if name in bundled_corpora():
        bundled_path(name, split)  # raises, listing the splits the corpus has, unless it has this one
        return
    raise CorpusError(N_("unknown split {split!r}: choose one of {SPLITS}"), split=split, SPLITS=', '.join(SPLITS))


def _is_tsv(path: Path) -> bool:
    return path.name.endswith(_SUFFIXES)


def absolute_corpus(source: str) -> str:
    """`source` as a run records it: a file (or each of "SRC_FILE,TGT_FILE") as an absolute path, so that
    `evaluate RUN` finds it from any folder; a bundled name as it is."""
    path = Path(source)
    if path.exists() and not path.is_dir():  # a folder is not a corpus: a bundled name of that name is meant
        return str(path.resolve())
    if "," in source and source not in bundled_corpora():
        parts = [p.strip() for p in source.split(",", 1)]
        if all(Path(p).exists() for p in parts):
            return ",".join(str(Path(p).resolve()) for p in parts)
    return source


def check_corpus(source: str | Path) -> None:
    """A one-line CorpusError unless `source` names something `load_pairs` can read (a file, a bundled name or two
    files "SRC_FILE,TGT_FILE"); nothing is read. `train` calls it before it writes into --out."""
    text, path = str(source), Path(source)
    if path.exists() or text in bundled_corpora():
        return
    if "," in text and all(Path(p.strip()).exists() for p in text.split(",", 1)):
        return
    raise _not_found(text)


def _digest(text: str) -> bytes:
    return hashlib.blake2b(text.encode("utf-8", "surrogateescape"), digest_size=8).digest()


def holdout_sizes(n_distinct: int) -> int:
    """How many distinct source sentences each of valid and test takes from a file of `n_distinct` (0: no split)."""
    if n_distinct < HOLDOUT_LEAST:
        return 0
    return min(HOLDOUT_MAX, max(1, round(n_distinct * HOLDOUT_SHARE)))


def held_out(rows: list, split: str, key: Callable[[Any], str] = str) -> list:
    """`split`'s rows of one file under the hash rule: the distinct keys (source sentences) sorted by their
    BLAKE2b digest; the first k go to valid, the next k to test (k = holdout_sizes), the rest to train. A key's
    every row lands in one split, so a sentence repeated in the file never reaches both train and test."""
    order = sorted({_digest(key(r)) for r in rows})
    k = holdout_sizes(len(order))
    if k == 0:
        return rows
    valid, test = set(order[:k]), set(order[k:2 * k])
    want = {"valid": valid.__contains__, "test": test.__contains__,
            "train": lambda d: d not in valid and d not in test}[split]
    return [r for r in rows if want(_digest(key(r)))]


def is_bundled(source: str | Path) -> bool:
    """A bundled corpus name (it brings its own splits), not a user's file."""
    return str(source) in bundled_corpora() and not Path(source).is_file()


def load_pairs(source: str | Path, split: str = "train", on_error: str = "stop",
               holdout: str = "none") -> list[tuple[str, str]]:
    """(source, target) sentence pairs from a bundled name, a TSV file or ``"SRC_FILE,TGT_FILE"``; holdout "hash":
    a user's file's `split` share (`held_out`), "none": the whole file whatever the split."""
    if holdout not in HOLDOUTS:
        raise ValueError(f"holdout must be one of {HOLDOUTS}, got {holdout!r}")
    pairs = _load_pairs(source, split, on_error)
    if holdout == "hash" and not is_bundled(source) and split in SPLITS:
        return held_out(pairs, split, key=lambda p: p[0])
    return pairs


def _load_pairs(source: str | Path, split: str, on_error: str) -> list[tuple[str, str]]:
    if on_error not in ON_ERROR:
        raise ValueError(f"on_error must be one of {ON_ERROR}, got {on_error!r}")
    path = Path(source)
    _check_split(source, split)
    if path.is_file():
        return read_tsv(path, on_error)
    if path.exists() and not path.is_dir():  # a FIFO or a device: refused, not read (it could block for ever)
        regular_file(path, CorpusError)
    text = str(source)
    if text in bundled_corpora():
        file = bundled_path(text, split)
        return read_tsv(file, on_error, name=f"{text}/{file.name}")
    if "," in text:
        src_file, tgt_file = (p.strip() for p in text.split(",", 1))
        return read_parallel(src_file, tgt_file, on_error)
    raise _not_found(text)


def load_text(
    source: str | Path, split: str = "train", side: str = "both", on_error: str = "stop", holdout: str = "none"
) -> list[str]:
    """Sentences for language modelling: lines of a plain text file, or one side of a parallel corpus.

    A bundled name, a ``.tsv``/``.tsv.gz`` file or ``"SRC,TGT"`` gives its `side` ("src", "tgt" or
    "both": all sources then all targets); any other file gives its non-blank lines, stripped.
    """
    if side not in SIDES:
        raise ValueError(f"side must be one of {SIDES}, got {side!r}")
    path = Path(source)
    _check_split(source, split)
    if path.is_file() and not _is_tsv(path):
        lines = [line.strip() for line in _read_lines(path) if line.strip()]
        return held_out(lines, split) if holdout == "hash" and split in SPLITS else lines
    pairs = load_pairs(source, split, on_error, holdout)
    srcs = [s for s, _ in pairs] if side in ("src", "both") else []
    tgts = [t for _, t in pairs] if side in ("tgt", "both") else []
    return srcs + tgts


def corpus_sources(name: str) -> list[tuple[str, int]] | None:
    """[(source, train pairs)] of a bundled corpus merged from several sources, in the order its train file holds
    them (its STATS.json, written by the build script: `software`); None for any other corpus."""
    import json

    stats = CORPORA_DIR / str(name) / "STATS.json"
    if str(name) not in bundled_corpora() or not stats.is_file():
        return None
    sources = json.loads(stats.read_text(encoding="utf-8")).get("sources", {})
    return [(source, part["pairs"]["train"]) for source, part in sources.items()]


def check_upsample(corpus: str, factors: dict[str, int]) -> list[tuple[str, int]]:
    """corpus_sources(corpus), or a one-line CorpusError if it has none or lacks a source of `factors`."""
    parts = corpus_sources(corpus)
    if parts is None:
        raise CorpusError(N_("upsample= needs a bundled corpus made of several sources (software); {corpus!r} has "
                             "none: repeat lines in your TSV file instead"), corpus=corpus)
    names = [source for source, _ in parts]
    unknown = sorted(set(factors) - set(names))
    if unknown:
        raise CorpusError(N_("upsample={unknown}: not a source of {corpus} ({names})"), unknown=','.join(unknown),
                          corpus=corpus, names=', '.join(names))
    return parts


def upsample_sources(pairs: list[tuple[str, str]], corpus: str, factors: dict[str, int]) -> list[tuple[str, str]]:
    """The train pairs of a multi-source corpus with each source of `factors` repeated that many times in all
    (fairseq's --upsample-primary, per source): `pairs`, then round r = 1 .. max-1 appends the part of every
    source whose factor exceeds r, in corpus order. Unknown sources and corpora without sources are errors."""
    parts = check_upsample(corpus, factors)
    if sum(n for _, n in parts) != len(pairs):
        raise CorpusError(N_("{corpus}/STATS.json counts {sum} train pairs but its train file holds {n_pairs}: "
                             "rebuild the corpus (docs/corpus.md)"), corpus=corpus, sum=sum(n for _, n in parts),
                          n_pairs=len(pairs))
    spans, start = [], 0  # (source, its slice of `pairs`), in corpus order
    for source, n in parts:
        spans.append((source, slice(start, start + n)))
        start += n
    out = list(pairs)
    for r in range(1, max(factors.values(), default=1)):
        out += [p for source, part in spans if factors.get(source, 1) > r for p in pairs[part]]
    return out

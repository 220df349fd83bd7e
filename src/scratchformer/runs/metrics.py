"""RUN_DIR/metrics.jsonl: one JSON record per log, validation or final event, appended as training goes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any

from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, CheckpointError
from scratchformer.runs.files import atomic_path
from scratchformer.runs.names import METRICS


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """One line; O_NOFOLLOW: never append through a symlink planted in the run directory."""
    fd = os.open(Path(run_dir) / METRICS, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with open(fd, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")


MAX_POINTS = 5000  # records kept per kind by read_records: a curve needs no more, a 300 MB log no more memory
MAX_KINDS = 16  # distinct kinds read (the trainer writes train, valid, final)
MAX_LINE = 1 << 20  # bytes of one record line (the trainer writes a few hundred)

def _number(value: Any) -> bool:
    return isinstance(value, (int, float)) and not isinstance(value, bool)


def is_record(record: Any) -> bool:
    """A record as the trainer writes it: an object with a `kind` string and a whole `step`, and the numbers that
    curves are drawn from (loss, valid_loss, bleu), where present, numbers or null."""
    if not isinstance(record, dict) or not isinstance(record.get("kind"), str):
        return False
    if not isinstance(record.get("step"), int) or isinstance(record.get("step"), bool):
        return False
    return all(_number(record[k]) or record[k] is None for k in ("loss", "valid_loss", "bleu") if k in record)


def _lines(path: Path) -> Iterator[bytes]:
    """The file's lines, one at a time; a line longer than MAX_LINE is skipped (read past in pieces), never held."""
    with open(path, "rb") as f:
        while True:
            line = f.readline(MAX_LINE)
            if not line:
                return
            if len(line) == MAX_LINE and not line.endswith(b"\n"):
                while (rest := f.readline(MAX_LINE)) and not rest.endswith(b"\n"):
                    pass
                continue
            yield line


def read_records(run_dir: Path, limit: int = MAX_POINTS, name: str = METRICS) -> list[dict[str, Any]]:
    """The records of RUN_DIR/metrics.jsonl (or RUN_DIR/`name`) in file order, read line by line in bounded memory:
    of each kind at most about 2 x `limit`, evenly thinned (every 2nd, then every 4th, ...: a long curve keeps its
    shape) plus the last one. Lines that are not records (damaged, a list, a string for a step: `is_record`) are
    skipped."""
    path = Path(run_dir) / name
    if not path.is_file():
        return []
    kept: dict[str, list[tuple[int, dict[str, Any]]]] = {}
    seen: dict[str, int] = {}
    stride: dict[str, int] = {}
    last: dict[str, tuple[int, dict[str, Any]]] = {}
    for n, line in enumerate(_lines(path)):
        try:
            record = loads_json(line.decode("utf-8"))
        except ValueError:  # not UTF-8, not JSON, nested too deeply
            continue
        if not is_record(record) or (record["kind"] not in kept and len(kept) >= MAX_KINDS):
            continue
        kind = record["kind"]
        count = seen.get(kind, 0)
        seen[kind], last[kind] = count + 1, (n, record)
        if count % stride.setdefault(kind, 1) == 0:
            kept.setdefault(kind, []).append((n, record))
            if len(kept[kind]) >= 2 * limit:  # thin out: keep every other point, then take every 2nd as they come
                kept[kind], stride[kind] = kept[kind][::2], stride[kind] * 2
    for kind, (n, record) in last.items():
        if kept.get(kind, [(None, None)])[-1][0] != n:
            kept.setdefault(kind, []).append((n, record))
    return [record for _, record in sorted((p for points in kept.values() for p in points), key=lambda p: p[0])]


def trim_records(run_dir: Path, step: int, warn: Callable[..., None], write: bool = True) -> None:
    """Forget what an interrupted run logged after checkpoint `step`. A torn last line (the process died while
    writing it) is dropped with a warning (`warn(template, **fields)`: the trainer's, which translates it); a damaged
    line elsewhere is an error naming it."""
    metrics = Path(run_dir) / METRICS
    if not metrics.exists():
        return
    lines = metrics.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = loads_json(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if n == len(lines):
                warn(N_("{metrics}: dropped its torn last line {n} (the run died while writing it)"), metrics=metrics,
                     n=n)
                continue
            raise CheckpointError(N_("{metrics}, line {n}: not a JSON record ({e}): fix or delete that line, then "
                                     "--resume"), metrics=metrics, n=n, e=e) from None
        if record.get("step", 0) <= step:
            kept.append(line)
    if write:
        with atomic_path(metrics) as tmp:
            tmp.write_text("".join(k + "\n" for k in kept), encoding="utf-8")


def reset_records(run_dir: Path) -> None:
    """A fresh run starts a fresh log (and never writes into a file a symlink points to)."""
    metrics = Path(run_dir) / METRICS
    if metrics.is_symlink() or metrics.exists():
        metrics.unlink()

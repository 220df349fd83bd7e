"""RUN_DIR/metrics.jsonl: one JSON record per log, validation or final event, appended as training goes."""

from __future__ import annotations

import json
import os
from collections.abc import Callable
from pathlib import Path
from typing import Any

from scratchformer.errors import CheckpointError
from scratchformer.runs.files import atomic_path
from scratchformer.runs.names import METRICS


def append_record(run_dir: Path, record: dict[str, Any]) -> None:
    """One line; O_NOFOLLOW: never append through a symlink planted in the run directory."""
    fd = os.open(Path(run_dir) / METRICS, os.O_WRONLY | os.O_APPEND | os.O_CREAT | os.O_NOFOLLOW, 0o666)
    with open(fd, "a", encoding="utf-8") as f:
        f.write(json.dumps(record, ensure_ascii=False) + "\n")


def read_records(run_dir: Path) -> list[dict[str, Any]]:
    path = Path(run_dir) / METRICS
    return [json.loads(x) for x in path.read_text().splitlines() if x.strip()] if path.exists() else []


def trim_records(run_dir: Path, step: int, warn: Callable[[str], None], write: bool = True) -> None:
    """Forget what an interrupted run logged after checkpoint `step`. A torn last line (the process died while
    writing it) is dropped with a warning; a damaged line elsewhere is an error naming it."""
    metrics = Path(run_dir) / METRICS
    if not metrics.exists():
        return
    lines = metrics.read_text(encoding="utf-8", errors="replace").splitlines()
    kept = []
    for n, line in enumerate(lines, 1):
        if not line.strip():
            continue
        try:
            record = json.loads(line)
            if not isinstance(record, dict):
                raise ValueError("not a JSON object")
        except ValueError as e:
            if n == len(lines):
                warn(f"{metrics}: dropped its torn last line {n} (the run died while writing it)")
                continue
            raise CheckpointError(f"{metrics}, line {n}: not a JSON record ({e}): fix or delete that "
                                  "line, then --resume") from None
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

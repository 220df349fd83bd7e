"""The one writer of benchmarks/results.jsonl: every figure a benchmark emits becomes one row there, with what it
takes to re-prove it.

A row is the figure as `benchlib.emit` builds it (figure, unit, ours, peer, peer_name, ratio, target, met, note,
load, ...) plus its provenance:
    name          the figure's name: the script's (bench_padding.py -> "padding"), as `benchmarks/run.py NAME` and
                  `make bench FIGURE=NAME` take it
    command       the argv that measured it, from the repository root
    commit        `git rev-parse HEAD`, and dirty: whether the work tree differed from it (git status --porcelain)
    cpu, simd     the CPU model and the flags that choose kernels (avx2, avx512f, avx512_bf16, the VNNIs, amx*)
    load_before   the load average (1, 5, 15 min) when the script started, load_after when the row was written
    versions      torch and the peers installed beside it (ctranslate2, transformers, onnxruntime, sacrebleu, ...)
    date          the day (UTC) the row was written

Rows are appended, never rewritten: a re-run adds new rows and the renderer (render.py) picks the newest run of a
figure per CPU kind. Rows written before this file existed keep their date; their commit is null and
`commit_note` says so (and `recorded_in` names the commit that first wrote the row to results.jsonl).

Only a benchmark script run as a program records (`python benchmarks/bench_*.py`, directly or through run.py): a
test that calls `benchlib.emit` writes nothing, nor does a `--quick` smoke run. SCRATCHFORMER_RESULTS names another
file (the tests' tmp file).
"""

from __future__ import annotations

import datetime
import importlib.metadata
import json
import os
import platform
import subprocess
import sys
from pathlib import Path
from typing import Any

HERE = Path(__file__).resolve().parent
ROOT = HERE.parent
RESULTS = HERE / "results.jsonl"
PEERS = ("torch", "ctranslate2", "transformers", "onnxruntime", "sacrebleu", "tensorflow", "keras")
_LOAD_BEFORE = tuple(round(x, 2) for x in os.getloadavg())  # when the benchmark's process imported this module


def cpu_model() -> str:
    try:
        out = subprocess.run(["lscpu"], capture_output=True, text=True, timeout=10).stdout
        for line in out.splitlines():
            if line.lower().startswith("model name"):
                return line.split(":", 1)[1].strip()
    except (OSError, subprocess.SubprocessError):
        pass
    return platform.processor() or "unknown"


SIMD = ("avx2", "avx512f", "avx512_bf16", "avx512_vnni", "avx_vnni")  # and every amx* flag


def simd_flags(cpuinfo: str | None = None) -> list[str]:
    """The SIMD extensions that choose CPU kernels (SIMD, amx*), from /proc/cpuinfo's first flags line; [] if
    unknown (not Linux, not x86)."""
    if cpuinfo is None:
        try:
            cpuinfo = Path("/proc/cpuinfo").read_text(errors="replace")
        except OSError:
            return []
    for line in cpuinfo.splitlines():
        if line.startswith("flags") and ":" in line:
            flags = set(line.split(":", 1)[1].split())
            return [f for f in SIMD if f in flags] + sorted(f for f in flags if f.startswith("amx"))
    return []


def results_path() -> Path:
    return Path(os.environ.get("SCRATCHFORMER_RESULTS") or RESULTS)


def figure_name(script: str | os.PathLike) -> str | None:
    """bench_decode_paths.py -> "decode_paths"; None for a file that is not a benchmark script."""
    stem = Path(script).name
    if stem.startswith("bench_") and stem.endswith(".py"):
        return stem[len("bench_"):-len(".py")]
    return None


def recording(argv: list[str] | None = None) -> bool:
    """Whether this process is a benchmark script measuring for real (not a test, not --quick)."""
    argv = sys.argv if argv is None else argv
    return bool(argv) and figure_name(argv[0]) is not None and "--quick" not in argv


# The pages render.py rewrites from results.jsonl, and their language
PAGES = {"README.md": "en", "README.zh-CN.md": "zh", "docs/performance.md": "en", "docs/zh/performance.md": "zh",
         "benchmarks/RESULTS.md": "en"}
OUTPUTS = {"benchmarks/results.jsonl", *PAGES}  # what a run writes: results.jsonl, then the pages


def git_commit(root: Path = ROOT) -> tuple[str | None, bool | None]:
    """(HEAD's full hash, whether the work tree has changes); (None, None) outside a git checkout."""
    try:
        head = subprocess.run(["git", "rev-parse", "HEAD"], cwd=root, capture_output=True, text=True, timeout=10)
        status = subprocess.run(["git", "status", "--porcelain", "--untracked-files=no"], cwd=root,
                                capture_output=True, text=True, timeout=30)
    except (OSError, subprocess.SubprocessError):
        return None, None
    if head.returncode != 0:
        return None, None
    # results.jsonl changes with every run, and the pages render.py writes from it after each run.py call (README,
    # docs/performance.md ...): neither makes the measured code dirty, or a second figure after a first is "+"
    changed = [line for line in status.stdout.splitlines() if line[3:].strip() not in OUTPUTS]
    return head.stdout.strip(), bool(changed)


def versions() -> dict[str, str]:
    """torch's and the peers' installed versions (those not installed are left out)."""
    found = {}
    for name in PEERS:
        try:
            found[name] = importlib.metadata.version("tensorflow-cpu" if name == "tensorflow" else name)
        except importlib.metadata.PackageNotFoundError:
            if name == "tensorflow":
                try:
                    found[name] = importlib.metadata.version(name)
                except importlib.metadata.PackageNotFoundError:
                    pass
    return found


def command(argv: list[str]) -> list[str]:
    """The argv as run from the repository root: ["python", "benchmarks/bench_x.py", ...]."""
    script = Path(argv[0]).resolve()
    try:
        script_arg = str(script.relative_to(ROOT))
    except ValueError:
        script_arg = argv[0]
    return ["python", script_arg, *argv[1:]]


# The commit as the benchmark started: a commit made while it measures (minutes) must not be credited with it
_GIT_AT_START = git_commit() if recording() else None


def provenance(argv: list[str] | None = None) -> dict[str, Any]:
    """Everything a row records besides its figure (see the module docstring)."""
    argv = sys.argv if argv is None else argv
    commit, dirty = _GIT_AT_START if _GIT_AT_START and argv is sys.argv else git_commit()
    return {"name": figure_name(argv[0]), "command": command(argv), "commit": commit, "dirty": dirty,
            "cpu": cpu_model(), "simd": simd_flags(), "load_before": list(_LOAD_BEFORE),
            "load_after": [round(x, 2) for x in os.getloadavg()], "versions": versions(),
            "date": datetime.datetime.now(datetime.timezone.utc).date().isoformat()}


_PROVENANCE: dict[str, Any] = {}  # git and lscpu once per process; the load after is read per row


def append(record: dict[str, Any], path: Path | None = None, argv: list[str] | None = None) -> dict[str, Any]:
    """Append `record` with its provenance to results.jsonl (or `path`); return the row written."""
    if not _PROVENANCE or argv is not None:
        _PROVENANCE.update(provenance(argv))
    row = {**record, **_PROVENANCE, "load_after": [round(x, 2) for x in os.getloadavg()]}
    target = path or results_path()
    with open(target, "a", encoding="utf-8") as f:
        f.write(json.dumps(row, ensure_ascii=False) + "\n")
    return row


def record(record: dict[str, Any]) -> None:
    """benchlib.emit's hook: append when this process is a benchmark measuring for real."""
    if recording():
        append(record)


def load(path: Path | None = None) -> list[dict[str, Any]]:
    """Every row of results.jsonl, in the order written."""
    text = (path or results_path()).read_text(encoding="utf-8")
    return [json.loads(line) for line in text.splitlines() if line.strip()]

"""What every benchmark shares: thread set-up, interleaved timing, machine facts, one JSON line per figure.

A busy machine (other jobs, a 2-core CPU) makes single timings meaningless, so every comparison runs the
candidates in the SAME process, interleaved (A B B A A B ...: the order alternates each round, so a load
spike cannot favour one side), repeated, and reports medians and the ratio of medians. The load average is
recorded with every figure.

A figure is one JSON line, which results.py also appends to results.jsonl with its provenance (command, commit,
CPU, load, versions, date) when a benchmark script runs as a program:
    {"figure": ..., "unit": ..., "ours": x, "peer": y, "peer_name": ..., "ratio": x / y,
     "higher_is_better": true, "target": ">= 1.5x", "met": true, "note": ..., "load": [1, 5, 15 min],
     "machine": {"cpu": ..., "simd": ["avx2", ...], "torch": ..., "mkl": true, "onednn": true, "threads": 2}}
The machine names the CPU and the SIMD extensions the kernels pick from (the same code runs other GEMMs on an
AVX2-only AMD EPYC than on an AVX-512 Xeon), so a figure is never read without the machine it came from.
"""

from __future__ import annotations

import argparse
import functools
import json
import os
import statistics
import sys
import time
from collections.abc import Callable
from pathlib import Path
from typing import Any

import results
import torch
from results import SIMD, cpu_model, simd_flags  # noqa: F401 (the machine is results.py's)

from scratchformer.inspect.flops import matmul_rate, training_flops  # noqa: F401 (re-exported)

ROOT = Path(__file__).resolve().parents[1]


def add_common_args(p: argparse.ArgumentParser) -> None:
    p.add_argument("--threads", default="auto",
                   help="torch (and CTranslate2) threads: a number, or 'auto': all cores, or 1 when the 1-minute "
                        "load average says the cores are already busy (spin-waiting threads then cost more)")
    p.add_argument("--quick", action="store_true", help="fewer repeats (a smoke run, not a measurement)")
    p.add_argument("--repeats", type=int, default=None, help="interleaved rounds per comparison")


def setup_threads(choice: str | int) -> int:
    """Set torch's intra-op threads; return the number (CTranslate2 gets the same)."""
    cores = os.cpu_count() or 1
    if str(choice) == "auto":
        n = 1 if os.getloadavg()[0] >= cores - 0.5 else cores
    else:
        n = max(1, int(choice))
    torch.set_num_threads(n)
    return n


@functools.lru_cache(maxsize=1)
def _machine() -> str:  # JSON: read once per process (lscpu is a subprocess), copied per call
    return json.dumps({"cpu": cpu_model(), "simd": simd_flags(), "cores": os.cpu_count(), "torch": torch.__version__,
                       "mkl": torch.backends.mkl.is_available(), "onednn": torch.backends.mkldnn.is_available()})


def machine_info(threads: int | None = None) -> dict[str, Any]:
    """CPU model, SIMD flags, cores, torch version, MKL / oneDNN availability and the torch thread count."""
    return {**json.loads(_machine()), "threads": torch.get_num_threads() if threads is None else threads}


def describe_machine(info: dict[str, Any]) -> str:
    """One line for a RESULTS header: "AMD EPYC (avx2; no AVX-512, no AMX), 2 cores, 2 threads, torch ..."."""
    simd = info.get("simd") or []
    extras = [] if any(f.startswith("avx512") for f in simd) else ["no AVX-512"]
    extras += [] if any(f.startswith("amx") for f in simd) else ["no AMX"]
    flags = ", ".join(simd) if simd else "SIMD flags unknown"
    libs = ", ".join(n for n, on in (("MKL", info.get("mkl")), ("oneDNN", info.get("onednn"))) if on) or "no MKL/oneDNN"
    return (f"{info.get('cpu', 'unknown CPU')} ({'; '.join([flags] + extras)}), {info.get('cores')} cores, "
            f"{info.get('threads')} torch thread(s), torch {info.get('torch')} ({libs})")


def interleave(candidates: dict[str, Callable[[], Any]], repeats: int, warmup: int = 1) -> dict[str, list[float]]:
    """Seconds per call of each candidate: `warmup` untimed calls each, then `repeats` rounds in alternating
    order (A B, B A, A B, ...). Returns name -> list of times."""
    names = list(candidates)
    for _ in range(warmup):
        for name in names:
            candidates[name]()
    times: dict[str, list[float]] = {n: [] for n in names}
    for r in range(repeats):
        for name in names if r % 2 == 0 else names[::-1]:
            start = time.perf_counter()
            candidates[name]()
            times[name].append(time.perf_counter() - start)
    return times


def median(xs: list[float]) -> float:
    return statistics.median(xs)


def emit(figure: str, unit: str, ours: float, peer: float | None = None, peer_name: str = "", *,
         higher_is_better: bool = True, target_ratio: float | None = None, target_ours: float | None = None,
         note: str = "", **extra: Any) -> dict[str, Any]:
    """Print and return one figure. target_ratio: ours/peer must reach it (or stay under it when lower is
    better); target_ours: ours alone must reach it."""
    ratio = ours / peer if peer else None
    target, met = None, None
    if target_ratio is not None and ratio is not None:
        target = f"{'>=' if higher_is_better else '<='} {target_ratio:g}x"
        met = ratio >= target_ratio if higher_is_better else ratio <= target_ratio
    elif target_ours is not None:
        target = f"{'>=' if higher_is_better else '<='} {target_ours:g}"
        met = ours >= target_ours if higher_is_better else ours <= target_ours
    record = {"figure": figure, "unit": unit, "ours": _round(ours), "peer": _round(peer), "peer_name": peer_name,
              "ratio": _round(ratio), "higher_is_better": higher_is_better, "target": target, "met": met,
              "note": note, "load": [round(x, 2) for x in os.getloadavg()], "machine": machine_info(), **extra}
    print(json.dumps(record, ensure_ascii=False), flush=True)
    results.record(record)  # appended to results.jsonl when a benchmark script measures (not in tests, not --quick)
    return record


def _round(x: float | None) -> float | None:
    if x is None:
        return None
    return float(f"{x:.4g}")


def matmul_flops(threads: int, n: int = 2048, repeats: int = 5) -> float:
    """This machine's float32 matmul rate (FLOP/s): the best of `repeats` (n x n) @ (n x n) products."""
    return matmul_rate("cpu", torch.float32, n, repeats)


def log(msg: str) -> None:
    print(msg, file=sys.stderr, flush=True)



#!/usr/bin/env python3
"""Tokens per second of 1 process vs N gloo ranks (torchrun) on the bundled corpus, and how full a batch is.

    .venv/bin/python experiments/scaling-bench/scaling_bench.py                 # ~40 steps each, tiny preset, CPU
    .venv/bin/python experiments/scaling-bench/scaling_bench.py --steps 80 --max-tokens 4096 --preset demo

Prints JSON lines: one per set-up (target tokens/s of the whole job, median over log windows after the first
10 steps), one with the ratios, one with the batch fill (real source/target tokens per batch of --max-tokens
padded tokens), which turns `--max-tokens` into the paper's "tokens per update" (docs/scaling.md).

Set-ups: 1 process on 1 thread; 1 process on every core (OMP threads = cores); N ranks with cores/N threads each,
so that the last two use the same cores. Each rank takes a batch of --max-tokens, so the N-rank job makes
updates N times larger: compare tokens/s, not steps/s. The figures are only as quiet as the machine: the load
average before each run is printed with it.
"""

from __future__ import annotations

import argparse
import json
import os
import socket
import statistics
import subprocess
import sys
import tempfile
import time
from pathlib import Path


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _train_args(out: Path, a: argparse.Namespace) -> list[str]:
    return ["train", "--out", str(out), "--corpus", a.corpus, "--preset", a.preset, "--max-steps", str(a.steps),
            f"max_tokens={a.max_tokens}", "log_every=10", "eval_every=0", "save_every=0",
            "bleu_samples=0", "device=cpu", "--quiet", "--no-test"]


def _tokens_per_s(run: Path) -> tuple[float, list[float]]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    windows = [r["tokens_per_s"] for r in records if r["kind"] == "train" and r["step"] > 10]
    if not windows:
        raise SystemExit(f"{run}: no log window after step 10; use --steps >= 20")
    return statistics.median(windows), windows


def _run(name: str, cmd: list[str], threads: int, out: Path) -> dict:
    env = {k: v for k, v in os.environ.items() if k not in ("RANK", "WORLD_SIZE", "LOCAL_RANK")}
    env["OMP_NUM_THREADS"] = str(threads)
    load_before = os.getloadavg()[0]
    start = time.time()
    proc = subprocess.run(cmd, env=env, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name} failed ({proc.returncode}):\n{proc.stderr[-3000:]}")
    median, windows = _tokens_per_s(out)
    return {"setup": name, "threads_per_process": threads, "tokens_per_s": round(median, 1),
            "windows": [round(w) for w in windows], "wall_s": round(time.time() - start, 1),
            "load_avg_before": round(load_before, 2)}


def _batch_fill(run: Path, a: argparse.Namespace) -> dict:
    """Real tokens in a batch of max_tokens padded tokens (padding and the shorter side are what is lost)."""
    from scratchformer.data.batching import encode_pairs, token_batches
    from scratchformer.data.corpus import load_pairs
    from scratchformer.runs import load_tokenizers

    src_tok, tgt_tok = load_tokenizers(run)
    examples = encode_pairs(load_pairs(a.corpus, "train"), src_tok, tgt_tok, 128)
    batches = token_batches([(len(s), len(t)) for s, t in examples], a.max_tokens, shuffle=True, seed=1)
    src = statistics.mean(sum(len(examples[i][0]) for i in b) for b in batches)
    tgt = statistics.mean(sum(len(examples[i][1]) - 1 for i in b) for b in batches)  # predicted tokens
    return {"batch_fill": {"max_tokens": a.max_tokens, "mean_src_tokens": round(src), "mean_tgt_tokens": round(tgt),
                           "src_share": round(src / a.max_tokens, 3), "tgt_share": round(tgt / a.max_tokens, 3)}}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--steps", type=int, default=40)
    p.add_argument("--nproc", type=int, default=2)
    p.add_argument("--preset", default="tiny")
    p.add_argument("--corpus", default="en-zh")
    p.add_argument("--max-tokens", type=int, default=2048, help="padded tokens per batch, per rank")
    p.add_argument("--cores", type=int, default=os.cpu_count() or 1)
    a = p.parse_args()
    threads_ranked = max(1, a.cores // a.nproc)
    with tempfile.TemporaryDirectory() as tmp:
        results = []
        for threads in sorted({1, a.cores}):
            out = Path(tmp) / f"one-{threads}"
            cmd = [sys.executable, "-m", "scratchformer", *_train_args(out, a)]
            results.append(_run(f"1 process, {threads} thread(s)", cmd, threads, out))
            print(json.dumps(results[-1]), flush=True)
        many = Path(tmp) / "many"
        torchrun = [sys.executable, "-m", "torch.distributed.run", "--nproc-per-node", str(a.nproc),
                    "--master-addr", "127.0.0.1", "--master-port", str(_free_port())]
        ranked = _run(f"{a.nproc} gloo ranks, {threads_ranked} thread(s) each",
                      [*torchrun, "-m", "scratchformer", *_train_args(many, a)], threads_ranked, many)
        print(json.dumps(ranked), flush=True)
        print(json.dumps({"ratio_vs_1_thread": round(ranked["tokens_per_s"] / results[0]["tokens_per_s"], 3),
                          "ratio_vs_all_cores": round(ranked["tokens_per_s"] / results[-1]["tokens_per_s"], 3),
                          "cores": a.cores, "nproc": a.nproc, "preset": a.preset, "steps": a.steps,
                          "max_tokens_per_rank": a.max_tokens}), flush=True)
        print(json.dumps(_batch_fill(Path(tmp) / "one-1", a)), flush=True)


if __name__ == "__main__":
    main()

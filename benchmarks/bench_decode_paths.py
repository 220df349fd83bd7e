#!/usr/bin/env python3
"""Our decoder's paths against CTranslate2's, interleaved, on the shipped model and its test split (issue 45).

    .venv/bin/python benchmarks/bench_decode_paths.py [--run-dir models/en-zh] [--sentences 200]
        [--batch1-sentences 30] [--repeats 3] [--threads 1] [--fresh 1000]
    .venv/bin/python benchmarks/bench_decode_paths.py --quick      # a smoke run: 8 sentences, greedy, one round

In one harness (benchlib.interleave: alternating order, medians of `--repeats` rounds), text in and text out, the
same sentences through: ours eager fp32 (`--step eager`, the reference), ours by default (no flag: `--step auto`
and `--dtype auto`, whose dtype the row's `step` names), ours fp32 by default (`--step auto --dtype fp32`: with a
warm cache, the captured step; its package is compiled before the rounds if this user's cache lacks it, and the
seconds that took are printed), ours bf16 (`--dtype bf16`, `--step auto`: captured where its package is cached,
compiled before the rounds too), and scratchformer's CTranslate2 engine in float32 and int8 (each in a child
process: ct2_worker.py). Our own int8 (dynamic quantisation) is gone: it measured 0.39-1.16x CTranslate2 float32
where CTranslate2's int8 gave 1.59-2.30x (docs/performance.md). Cells: greedy and beam 4 at batch 32 (`--sentences`)
and batch 1 (the first `--batch1-sentences`). Per candidate and cell: sentences/s, the ratio to CTranslate2 float32
and int8, BLEU against the references, and the share of outputs identical to ours eager fp32. Which step `auto` ran
is named (`step_in_use`): if autotune measured the captured step slower on this CPU, auto runs eager, and the row
says so.

The engines' parity (what bench_engines.py measured until it was folded in here): in each batch-32 cell, the
share of sentences that `--engine ctranslate2` (float32) and `--engine onnxruntime` translate exactly as ours eager
fp32 does (targets: greedy >= 99%, beam 4 >= 97%), and |BLEU difference| (target <= 0.2); onnxruntime is translated
once per cell, not timed.

`--fresh N`: whole `scratchformer translate --file` processes on N test sentences (greedy, batch 32) with an empty
cache (a temporary XDG_CACHE_HOME: the step rule decides, compile included if it compiles), then again with that
cache warm, against `--engine ctranslate2` on the same file; start-up (the same command on one sentence) subtracted.

Every figure is printed as one JSON line and appended to benchmarks/results.jsonl by benchlib.emit (results.py:
the command, commit, CPU model and flags, load, torch and peer versions, date; a `--quick` run records nothing).
`--no-captured` leaves out the compiles (no compiler, no time): `auto` then runs whatever is cached.
"""

from __future__ import annotations

import argparse
import os
import subprocess
import sys
import tempfile
import time
from pathlib import Path

from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads
from ct2_worker import CT2Process

from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
from scratchformer.runs import load_run

OURS = {  # name -> the options over DecodingOptions(beam, batch_size)
    "eager fp32": {"step": "eager", "dtype": "fp32"},
    "default": {"step": "auto"},  # the dtype too as decoding.json says: auto (bf16 where it measured faster)
    "default fp32": {"step": "auto", "dtype": "fp32"},
    "bf16": {"step": "auto", "dtype": "bf16"},
}
PEERS = {"ct2 float32": ("ctranslate2", "float32"), "ct2 int8": ("ctranslate2", "int8"),
         "onnxruntime": ("onnxruntime", None)}  # onnxruntime: its parity only, not timed
PARITY = {"ct2 float32": "ctranslate2", "onnxruntime": "onnxruntime"}  # the engines whose outputs must be ours
TARGET_SHARE = {1: 99.0, 4: 97.0}  # % identical outputs, greedy and beam 4 (issue 12)


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--batch1-sentences", type=int, default=30)
    p.add_argument("--no-captured", action="store_true", help="compile nothing before the rounds")
    p.add_argument("--cells", default="greedy-32,greedy-1,beam4-32,beam4-1", help="which cells, comma-separated")
    p.add_argument("--fresh", type=int, default=1000, metavar="N", help="the fresh-cache CLI run's sentences (0: none)")
    args = p.parse_args()
    if args.quick:
        args.sentences, args.batch1_sentences, args.repeats = 8, 4, args.repeats or 1
        args.cells, args.fresh = "greedy-32,greedy-1", min(args.fresh, 20)
    threads = setup_threads(args.threads)
    run = load_run(args.run_dir)
    corpus = run.train_config.corpus if run.train_config else "en-zh"
    pairs = load_pairs(corpus, "test", on_error="skip")
    rows: list[dict] = []
    workers = {}
    for name, (engine, compute) in PEERS.items():  # CTranslate2 patience 2
        try:
            workers[name] = CT2Process(threads)
            workers[name].request({"engine": str(args.run_dir), "name": engine, "threads": threads,
                                   "patience": 2.0, "compute_type": compute})
        except (ImportError, RuntimeError) as e:
            log(f"bench_decode_paths: {name} is unavailable ({e}): `pip install -e '.[export]'`")
            workers.pop(name, None)
    repeats = args.repeats or 3
    try:
        for beam in (1, 4):
            for batch, count in ((32, args.sentences), (1, args.batch1_sentences)):
                if f"{'greedy' if beam == 1 else f'beam{beam}'}-{batch}" in args.cells.split(","):
                    rows += cell(run, pairs[:count], beam, batch, workers, threads, repeats, not args.no_captured)
        if args.fresh:
            rows += fresh(args.run_dir, pairs[: args.fresh], threads)
    finally:
        for worker in workers.values():
            worker.close()
    return rows  # each figure was appended to results.jsonl by benchlib.emit (benchmarks/results.py)


def cell(run, pairs, beam: int, batch: int, workers: dict, threads: int, repeats: int, compile: bool) -> list[dict]:
    """One cell's interleaved rounds and its figures."""
    what = f"{'greedy' if beam == 1 else f'beam {beam}'}, batch {batch}"
    texts, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translators = {}
    for name, options in OURS.items():
        if compile and options.get("step") == "auto":  # warm the cache: compiled once if missing (timed)
            start = time.perf_counter()
            Translator(run, run.decoding.pick(beam=beam, batch_size=batch, **{**options, "step": "captured"}))
            log(f"bench_decode_paths: {name}, beam {beam}: captured package ready in "
                f"{time.perf_counter() - start:.1f} s (load {os.getloadavg()[0]:.2f})")
        # the run's decoding.json, as the CTranslate2 side (ct2_worker.py) and `translate` use it
        translators[name] = Translator(run, run.decoding.pick(beam=beam, batch_size=batch, **options))
    keep: dict[str, list[str]] = {}

    def ours(name: str):
        def call() -> None:
            keep[name] = translators[name].translate(texts)
        return call

    def peer(name: str):
        def call() -> None:
            keep[name] = workers[name].ask({"translate": texts, "beam": beam, "batch_size": batch})
        return call

    timed = [n for n in workers if PEERS[n][1] is not None]  # onnxruntime: parity only
    candidates = {**{n: ours(n) for n in translators}, **{n: peer(n) for n in timed}}
    log(f"bench_decode_paths: {what}: {len(texts)} sentences x {repeats} round(s), threads {threads}")
    times = interleave(candidates, repeats, warmup=1)
    if batch == 32 and "onnxruntime" in workers:  # parity only: one untimed call
        peer("onnxruntime")()
    rate = {n: len(texts) / median(t) for n, t in times.items()}
    scores = {n: round(bleu(keep[n], refs)["score"], 2) for n in keep}
    same = {n: sum(a == b for a, b in zip(keep[n], keep["eager fp32"])) for n in keep}
    steps = {n: t.backend.step_in_use() for n, t in translators.items()}
    common = {"threads": threads, "sentences": len(texts), "beam": beam, "batch": batch, "rounds": repeats,
              "times": {k: [round(t, 3) for t in v] for k, v in times.items()}}
    rows = []
    for name in rate:
        values = {**common, "bleu": scores[name], "identical_to_eager_fp32": f"{same[name]}/{len(texts)}",
                  "step": steps.get(name, name), "vs_ct2_int8": round(rate[name] / rate["ct2 int8"], 3)
                  if "ct2 int8" in rate else None}
        peer_rate = rate.get("ct2 float32")
        rows.append(emit(f"decode paths: {what}, {name} vs CTranslate2 float32", "sentences/s", rate[name],
                         peer_rate, "CTranslate2 engine (float32)" if peer_rate else "",
                         note=f"step in use: {values['step']}; BLEU {scores[name]}; identical to eager fp32: "
                              f"{values['identical_to_eager_fp32']}", **values))
    if batch == 32:
        rows += parity(keep, refs, beam, common)
    return rows


def parity(keep: dict[str, list[str]], refs: list[str], beam: int, common: dict) -> list[dict]:
    """The engines' outputs against ours eager fp32 on the same sentences: identical share and BLEU difference."""
    what, ours, rows = "greedy" if beam == 1 else f"beam {beam}", keep["eager fp32"], []
    n, b_ours = len(ours), bleu(ours, refs)["score"]
    for name, engine in PARITY.items():
        if name not in keep:
            continue
        theirs = keep[name]
        same = sum(a == b for a, b in zip(ours, theirs))
        rows.append(emit(f"engines: {what}, identical outputs ({engine})", "% of sentences", 100.0 * same / n,
                         target_ours=TARGET_SHARE[beam], note=f"{same} of {n}; differing: "
                         f"{[i for i in range(n) if ours[i] != theirs[i]][:20]}", **common))
        rows.append(emit(f"engines: {what}, |BLEU difference| ({engine})", "BLEU",
                         abs(b_ours - bleu(theirs, refs)["score"]), higher_is_better=False, target_ours=0.2,
                         **common))
    return rows


def fresh(run_dir: Path, pairs, threads: int) -> list[dict]:
    """Whole CLI processes on a fresh, then a warm cache, and CTranslate2's, start-up subtracted."""
    with tempfile.TemporaryDirectory(prefix="bench-fresh-") as tmp:
        src, one = Path(tmp) / "src.txt", Path(tmp) / "one.txt"
        src.write_text("".join(s + "\n" for s, _ in pairs), encoding="utf-8")
        one.write_text(pairs[0][0] + "\n", encoding="utf-8")
        env = {**os.environ, "XDG_CACHE_HOME": str(Path(tmp) / "cache"), "PYTHONPATH": str(ROOT / "src")}

        def cli(file: Path, *extra: str) -> tuple[float, str, str]:
            start = time.perf_counter()
            out = subprocess.run([sys.executable, "-m", "scratchformer", "translate", str(run_dir), "--file", str(file),
                                  "--beam", "1", "--batch-size", "32", "--threads", str(threads), *extra],
                                 capture_output=True, text=True, env=env, timeout=3600)
            if out.returncode:
                raise RuntimeError(f"translate failed: {out.stderr.strip().splitlines()[-1:]}")
            return time.perf_counter() - start, out.stdout, out.stderr

        # the least of two one-sentence runs each, interleaved: a first run pays cold file caches (the
        # CTranslate2 side's once took 4.6 s against 2-3 s after, which made its 1,000 sentences look 2x faster)
        runs = [(cli(one, "--step", "eager")[0], cli(one, "--engine", "ctranslate2")[0]) for _ in range(2)]
        startup = {"ours": min(r[0] for r in runs), "ct2": min(r[1] for r in runs)}
        first, out_first, err = cli(src)  # fresh: the rule decides (compile included if it compiles)
        second, out_second, _ = cli(src)  # warm
        peer, out_peer, _ = cli(src, "--engine", "ctranslate2")
    compiled = "compiling the captured decoding step" in err
    log(f"bench_decode_paths: fresh cache, {len(pairs)} sentences: first {first:.1f} s "
        f"({'compiled' if compiled else 'no compile'}), second {second:.1f} s, CTranslate2 {peer:.1f} s; start-up "
        f"ours {startup['ours']:.1f} s, CTranslate2 {startup['ct2']:.1f} s")
    n, rows = len(pairs), []

    def rate(seconds: float, start: float) -> float | None:  # None: the run was not longer than its start-up
        return n / (seconds - start) if seconds > start else None

    peer_rate = rate(peer, startup["ct2"])
    for name, seconds, out in (("fresh cache (compile included)", first, out_first), ("warm cache", second,
                                                                                      out_second)):
        same = sum(a == b for a, b in zip(out.splitlines(), out_peer.splitlines()))
        ours = rate(seconds, startup["ours"])
        rows.append(emit(f"translate --file, {n} sentences, greedy batch 32, {name} vs CTranslate2 float32",
                         "sentences/s", ours or 0.0, peer_rate if ours else None,
                         "CTranslate2 engine (float32), whole CLI process", note=f"compiled: {compiled}; "
                         f"identical to CTranslate2: {same}/{n}; start-up subtracted" + ("" if ours and peer_rate else
                         "; too few sentences to exceed the start-up: no ratio"), seconds=round(seconds, 2),
                         peer_seconds=round(peer, 2), startup={k: round(v, 2) for k, v in startup.items()},
                         threads=threads, sentences=n, compiled=compiled, stderr_first=err.strip().splitlines()[:3]))
    return rows


if __name__ == "__main__":
    main()

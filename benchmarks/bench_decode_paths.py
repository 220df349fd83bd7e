#!/usr/bin/env python3
"""Our decoder's step paths against each other and against CTranslate2, interleaved, on the shipped model.

    .venv/bin/python benchmarks/bench_decode_paths.py [--run-dir models/en-zh] [--sentences 200]
                                                      [--batch1-sentences 30] [--repeats 3] [--threads 1]

Four candidates translate the same test sentences, text in and text out, in one process harness (benchlib.
interleave: alternating order, medians of `--repeats` rounds): ours through the modules (`SCRATCHFORMER_LEAN_STEP=0`,
the reference), ours through the lean step (decoding/fast_step.py, `--step eager`), ours through the captured step
(decoding/captured.py, `--step captured`: compiled before the timing if this user's cache lacks it; the seconds that
took are printed) and scratchformer's CTranslate2 engine (float32, in a child process: ct2_worker.py). Cells: greedy
and beam 4 at batch 32 (all `--sentences`) and at batch 1 (the first `--batch1-sentences`). Also: the share of
sentences whose lean and captured outputs equal the modules' output (the target is all of them). `--no-captured`
leaves the captured column out (no compiler, or no time to compile). `--identity N`: instead, the first N test
sentences translated once with the eager and once with the captured step (greedy and beam 4, batch 32, or
`--identity-batch`): how many outputs are identical, and both BLEU scores.
"""

from __future__ import annotations

import argparse
import contextlib
import os
import time
from pathlib import Path

from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads
from ct2_worker import CT2Process

from scratchformer.data.corpus import load_pairs
from scratchformer.decoding.fast_step import modules_step
from scratchformer.engines import Translator
from scratchformer.runs import load_run


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--sentences", type=int, default=200)
    p.add_argument("--batch1-sentences", type=int, default=30)
    p.add_argument("--no-captured", action="store_true", help="leave out the captured step (decoding/captured.py)")
    p.add_argument("--cells", default="greedy-32,greedy-1,beam4-32,beam4-1", help="which cells, comma-separated")
    p.add_argument("--identity", type=int, default=0, metavar="N", help="eager vs captured outputs and BLEU on N "
                   "test sentences (no timing)")
    p.add_argument("--identity-batch", type=int, default=32, metavar="B", help="the batch size of --identity")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    run = load_run(args.run_dir)
    corpus = run.train_config.corpus if run.train_config else "en-zh"
    if args.identity:
        return identity(run, load_pairs(corpus, "test", on_error="skip")[: args.identity], threads,
                        args.identity_batch)
    texts = [s for s, _ in load_pairs(corpus, "test", on_error="skip")[: args.sentences]]
    workers = {}
    try:  # CTranslate2 patience 2, as bench_engines.py
        workers["ct2"] = CT2Process(None, threads)
        workers["ct2"].request({"engine": str(args.run_dir), "name": "ctranslate2", "threads": threads,
                                "patience": 2.0})
    except (ImportError, RuntimeError) as e:
        log(f"bench_decode_paths: the ctranslate2 engine is unavailable ({e}); ours only")
    repeats = args.repeats or 3
    for beam in (1, 4):
        what = "greedy" if beam == 1 else f"beam {beam}"
        for batch, use in ((32, texts), (1, texts[: args.batch1_sentences])):
            if f"{'greedy' if beam == 1 else f'beam{beam}'}-{batch}" not in args.cells.split(","):
                continue
            keep: dict[str, list[str]] = {}

            eager = Translator(run, run.decoding.pick(beam=beam, batch_size=batch, step="eager"))

            def ours(lean: str, key: str, use=use, keep=keep, eager=eager):
                def call() -> None:
                    with modules_step() if lean == "0" else contextlib.nullcontext():
                        keep[key] = eager.translate(use)
                return call

            candidates = {"modules": ours("0", "modules"), "lean": ours("1", "lean")}
            if not args.no_captured:
                start = time.perf_counter()  # compiles here (one line says so) unless this user's cache has it
                fast = Translator(run, run.decoding.pick(beam=beam, batch_size=batch, step="captured"))
                log(f"bench_decode_paths: the captured step for beam {beam} ready in "
                    f"{time.perf_counter() - start:.1f} s (load {os.getloadavg()[0]:.2f})")

                def captured(fast=fast, use=use, keep=keep) -> None:
                    keep["captured"] = fast.translate(use)

                candidates["captured"] = captured
            if "ct2" in workers:
                candidates["ct2"] = lambda use=use, batch=batch, beam=beam: workers["ct2"].ask(
                    {"translate": use, "beam": beam, "batch_size": batch})
            log(f"bench_decode_paths: {what}, batch {batch}: {len(use)} sentences x {repeats}")
            times = interleave(candidates, repeats, warmup=1)
            same = sum(a == b for a, b in zip(keep["modules"], keep["lean"]))
            common = {"threads": threads, "sentences": len(use), "run": str(args.run_dir),
                      "times": {k: [round(t, 2) for t in v] for k, v in times.items()}}
            emit(f"decode paths: {what}, batch {batch}, lean step vs modules", "sentences/s",
                 len(use) / median(times["lean"]), len(use) / median(times["modules"]), "our modules' step",
                 note=f"identical outputs: {same} of {len(use)}", **common)
            if "captured" in times:
                same = sum(a == b for a, b in zip(keep["modules"], keep["captured"]))
                emit(f"decode paths: {what}, batch {batch}, captured step vs lean step", "sentences/s",
                     len(use) / median(times["captured"]), len(use) / median(times["lean"]), "our lean step",
                     note=f"identical outputs (captured vs modules): {same} of {len(use)}", **common)
            if "ct2" in times:
                for key in [k for k in ("captured", "lean", "modules") if k in times]:
                    emit(f"decode paths: {what}, batch {batch}, {key} vs CTranslate2", "sentences/s",
                         len(use) / median(times[key]), len(use) / median(times["ct2"]),
                         "CTranslate2 engine (float32)", **common)
    for worker in workers.values():
        worker.close()


def identity(run, pairs: list[tuple[str, str]], threads: int, batch: int = 32) -> None:
    """Eager and captured outputs of `pairs`' sources, greedy and beam 4 at `batch`: identical count and BLEU."""
    from scratchformer.evaluation.metrics import bleu

    texts, refs = [s for s, _ in pairs], [t for _, t in pairs]
    for beam in (1, 4):
        out = {step: Translator(run, run.decoding.pick(beam=beam, batch_size=batch, step=step)).translate(texts)
               for step in ("eager", "captured")}
        same = sum(a == b for a, b in zip(out["eager"], out["captured"]))
        scores = {step: bleu(hyps, refs)["score"] for step, hyps in out.items()}
        emit(f"decode paths: {'greedy' if beam == 1 else f'beam {beam}'}, captured vs eager outputs", "BLEU",
             scores["captured"], scores["eager"], "the eager (lean) step",
             note=f"identical outputs: {same} of {len(texts)}", threads=threads, sentences=len(texts), batch=batch)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Decoding engines on the shipped model: ours (PyTorch) against `--engine ctranslate2` and `--engine onnxruntime`.

    .venv/bin/python benchmarks/bench_engines.py [--run-dir models/en-zh] [--sentences 1000] [--speed-sentences 100]
                                                 [--patience 2] [--threads auto|N] [--quick] [--repeats R]

Both engines translate the run's test split exactly as `scratchformer translate` does (text in, text out: the
tokenizers, source length + 50 budgets, the GNMT length penalty 0.6), greedy and beam 4. The CTranslate2 engine
and onnxruntime engines are scratchformer's own (`Translator`, float32, exported into RUN_DIR/export/ on first
use), each in a child process (ct2_worker.py says why); the parent times each request. Per decoding and engine:
  - sentences/s at batch 32 on all `--sentences`, and at batch 1 on the first `--speed-sentences`, the
    engines interleaved (benchlib.interleave), medians of `--repeats` rounds;
  - BLEU of each (sacreBLEU, as `evaluate`), and |BLEU difference| (target <= 0.2);
  - the share of sentences whose outputs are identical (targets: greedy >= 99%, beam 4 >= 97%).
"""

from __future__ import annotations

import argparse
from pathlib import Path

from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads
from ct2_worker import CT2Process

from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
from scratchformer.runs import load_run

TARGET_SHARE = {1: 99.0, 4: 97.0}  # % identical outputs, greedy and beam 4 (issue 12)


ENGINES = {"ct2": ("ctranslate2", "CTranslate2 engine (float32)"),
           "ort": ("onnxruntime", "onnxruntime engine (float32)")}


def candidates(run, workers: dict[str, CT2Process], texts: list[str], beam: int, batch: int, keep: dict) -> dict:
    """Ours and each engine as calls for benchlib.interleave; each stores its translations in `keep`."""
    translator = Translator(run, run.decoding.pick(engine="torch", beam=beam, batch_size=batch))

    def ours() -> None:
        keep["ours"] = translator.translate(texts)

    def engine(key: str):
        def call() -> None:
            keep[key] = workers[key].ask({"translate": texts, "beam": beam, "batch_size": batch})
        return call

    return {"ours": ours, **{key: engine(key) for key in workers}}


def start_workers(run_dir: Path, threads: int, patience: float) -> dict[str, CT2Process]:
    """One child process per engine that installs (each exports into RUN_DIR/export/ on first use)."""
    workers = {}
    for key, (name, _) in ENGINES.items():
        try:
            worker = CT2Process(None, threads)
            worker.request({"engine": str(run_dir), "name": name, "threads": threads, "patience": patience})
            workers[key] = worker
        except (ImportError, RuntimeError) as e:
            log(f"bench_engines: the {name} engine is unavailable ({e}): `pip install -e '.[export]'`")
    return workers


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--sentences", type=int, default=1000, help="test sentences for quality and batch-32 speed")
    p.add_argument("--speed-sentences", type=int, default=100, help="of those, how many are timed at batch 1")
    p.add_argument("--patience", type=float, default=2.0, help="the ctranslate2 engine's beam patience")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    n = 200 if args.quick else args.sentences
    n1 = min(n, 30 if args.quick else args.speed_sentences)
    run = load_run(args.run_dir)
    corpus = run.train_config.corpus if run.train_config else "en-zh"
    pairs = load_pairs(corpus, "test", on_error="skip")[:n]
    src, refs = [s for s, _ in pairs], [t for _, t in pairs]
    workers = start_workers(args.run_dir, threads, args.patience)
    if not workers:
        return
    common = {"threads": threads, "sentences": n, "run": str(args.run_dir)}
    for beam in (1, 4):
        what = "greedy" if beam == 1 else f"beam {beam}"
        outputs: dict[str, list[str]] = {}  # the batch-32 translations of each engine
        for batch, texts, repeats in ((32, src, args.repeats or 1), (1, src[:n1], args.repeats or 3)):
            log(f"bench_engines: {what}, batch {batch}: {len(texts)} sentences x {repeats} round(s)")
            keep = outputs if batch == 32 else {}
            times = interleave(candidates(run, workers, texts, beam, batch, keep), repeats, warmup=0)
            for key in workers:
                emit(f"engines: {what}, batch {batch}", "sentences/s", len(texts) / median(times["ours"]),
                     len(texts) / median(times[key]), ENGINES[key][1], **common,
                     note=f"{len(texts)} test sentences of {corpus}"
                          + (f"; CTranslate2 patience {args.patience}" if key == "ct2" else ""),
                     **{f"times_{k}": [round(t, 2) for t in times[k]] for k in ("ours", key)})
        ours = outputs["ours"]
        b_ours = bleu(ours, refs)
        for key in workers:
            theirs = outputs[key]
            b_theirs = bleu(theirs, refs)
            emit(f"engines: {what}, BLEU", "BLEU", b_ours["score"], b_theirs["score"], ENGINES[key][1],
                 note=b_ours["signature"], **common)
            emit(f"engines: {what}, |BLEU difference| ({ENGINES[key][0]})", "BLEU",
                 abs(b_ours["score"] - b_theirs["score"]), higher_is_better=False, target_ours=0.2, **common)
            same = sum(a == b for a, b in zip(ours, theirs))
            emit(f"engines: {what}, identical outputs ({ENGINES[key][0]})", "% of sentences", 100.0 * same / n,
                 target_ours=TARGET_SHARE[beam],
                 note=f"{same} of {n}; differing: {[i for i in range(n) if ours[i] != theirs[i]][:20]}", **common)
    for worker in workers.values():
        worker.close()


if __name__ == "__main__":
    main()

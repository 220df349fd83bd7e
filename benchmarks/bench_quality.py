#!/usr/bin/env python3
"""What `--int8` costs in translation quality: BLEU / chrF of a trained run, float32 against int8, same sentences.

    .venv/bin/python benchmarks/bench_quality.py [--run-dir DIR] [--sentences 200]

The run is models/en-zh when it exists, else /tmp/bench-run, trained first if missing with
`scratchformer train --recipe demo --out /tmp/bench-run --max-steps 200` (a few minutes; a weak model, but the
same code path). Both evaluations use scratchformer.evaluation.translation (greedy, sacreBLEU with the zh tokenizer)
on the first N test sentences; the int8 model is `quantize_int8` of the float one. Also times both translations
(informative: small batches of real sentences, not the fixed-length figures of bench_decode).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
import time
from pathlib import Path

from benchlib import ROOT, add_common_args, emit, log, setup_threads

from scratchformer.data.corpus import load_pairs
from scratchformer.decoding.quantize import quantize_int8
from scratchformer.evaluation.translation import evaluate_pairs
from scratchformer.runs import load_run

DEFAULT_RUN, FALLBACK_RUN = ROOT / "models" / "en-zh", Path("/tmp/bench-run")


def ensure_run(run_dir: Path | None) -> Path:
    if run_dir is not None:
        return run_dir
    if (DEFAULT_RUN / "config.json").exists():
        return DEFAULT_RUN
    if not (FALLBACK_RUN / "model.safetensors").exists():
        log(f"bench_quality: training {FALLBACK_RUN} (demo recipe, 200 steps)")
        subprocess.run([sys.executable, "-m", "scratchformer", "train", "--recipe", "demo", "--out", str(FALLBACK_RUN),
                        "--max-steps", "200", "--quiet", "--overwrite", "--no-test"], check=True)
    return FALLBACK_RUN


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    add_common_args(p)
    p.add_argument("--run-dir", type=Path, default=None)
    p.add_argument("--sentences", type=int, default=200)
    args = p.parse_args()
    threads = setup_threads(args.threads)
    run_dir = ensure_run(args.run_dir)
    run = load_run(run_dir)
    corpus = run.train_config.corpus if run.train_config else "en-zh"
    pairs = load_pairs(corpus, "test", on_error="skip")[: args.sentences]
    fp32_model, int8_model = run.model, quantize_int8(run.model)
    results, seconds = {}, {}
    for name, model in (("fp32", fp32_model), ("int8", int8_model)):
        run.model = model
        start = time.perf_counter()
        results[name] = evaluate_pairs(run, pairs, beam=1)
        seconds[name] = time.perf_counter() - start
    run.model = fp32_model
    note = f"{run_dir}, {len(pairs)} test sentences of {corpus}, greedy; {results['fp32']['bleu_signature']}"
    emit("quality: BLEU, int8 vs float32", "BLEU", results["int8"]["bleu"], results["fp32"]["bleu"], "ours float32",
         note=note, threads=threads)
    emit("quality: chrF, int8 vs float32", "chrF", results["int8"]["chrf"], results["fp32"]["chrf"], "ours float32",
         note=note, threads=threads)
    emit("quality: translation time, int8 vs float32", "s", seconds["int8"], seconds["fp32"], "ours float32",
         higher_is_better=False, note=f"{len(pairs)} sentences, batch 32, greedy, one run each", threads=threads)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""The shipped model's one BLEU headline and its chrF, measured as `make demo` measures it again: `scratchformer
evaluate RUN` with the arguments of README.json's "headline" (scripts/ship_checkpoint.py: `--split test --beam 1`;
evaluation.translation.evaluate_run: the run's own corpus and split, its decoding.json, that beam).

    .venv/bin/python benchmarks/bench_bleu.py [--run-dir models/en-zh] [--split S] [--beam N] [--corpus NAME]

--split, --beam, --corpus replace the headline's. The figure names the run, the corpus, the split, the beam, the
number of pairs and every decoding option used, so the row says which command reproduces it. `--quick`: the first
20 pairs, a smoke run that records nothing.
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

from benchlib import ROOT, emit, setup_threads

from scratchformer.evaluation.translation import evaluate_run


def headline_args(run_dir: Path) -> argparse.Namespace:
    """The evaluate arguments of README.json's "headline" (split, beam, corpus); test and decoding.json's beam
    where the run has none."""
    meta = run_dir / "README.json"
    given = json.loads(meta.read_text(encoding="utf-8")).get("headline", {}).get("args", []) if meta.is_file() else []
    p = argparse.ArgumentParser()
    p.add_argument("--split", default="test")
    p.add_argument("--beam", type=int)
    p.add_argument("--corpus")
    return p.parse_known_args(given)[0]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--split", default=None, help="instead of the headline's split (default test)")
    p.add_argument("--corpus", default=None, help="another corpus than the run's own (evaluate --corpus)")
    p.add_argument("--beam", type=int, default=None, help="instead of the headline's beam (evaluate --beam)")
    p.add_argument("--threads", default="auto")
    p.add_argument("--quick", action="store_true", help="the first 20 pairs: a smoke run, not a measurement")
    args = p.parse_args()
    threads = setup_threads(args.threads)
    head = headline_args(args.run_dir)
    beam = args.beam or head.beam
    result = evaluate_run(args.run_dir, args.split or head.split, 20 if args.quick else None,
                          corpus=args.corpus or head.corpus, **({"beam": beam} if beam else {}))
    run = args.run_dir.resolve().relative_to(ROOT) if args.run_dir.resolve().is_relative_to(ROOT) else args.run_dir
    what = f"{run}, {result['corpus']} {result['split']} split, beam {result['beam']}"
    metrics = {"run_dir", "corpus", "split", "sentences", "bleu", "chrf", "exact_match", "seconds", "bleu_ci95"}
    options = {k: v for k, v in result.items() if k not in metrics and not k.endswith(("_signature", "_rate"))
               and not k.startswith("unseen_")}
    note = (f"{result['sentences']} pairs; decoding: "
            + ", ".join(f"{k} {v}" for k, v in options.items()) + f"; {result['seconds']} s, {threads} thread(s)")
    extra = {"sentences": result["sentences"], "options": options}
    emit(f"bleu: {what}", "BLEU", result["bleu"], note=note, signature=result["bleu_signature"], **extra)
    emit(f"chrf: {what}", "chrF", result["chrf"], note=note, signature=result["chrf_signature"], **extra)


if __name__ == "__main__":
    main()

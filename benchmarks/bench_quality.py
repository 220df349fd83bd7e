#!/usr/bin/env python3
"""What the run's decoding.json (sentence splitting, copy repair) costs in time and gives in BLEU against whole
lines, at the same beam and alpha. (Its first figures, what the torch engine's own int8 cost in BLEU, went with that
int8: CTranslate2's int8 is the one we keep, docs/performance.md.)

    .venv/bin/python benchmarks/bench_quality.py [--run-dir DIR] [--sentences 200]

The run is models/en-zh when it exists, else /tmp/bench-run, trained first if missing with
`scratchformer train --recipe demo --out /tmp/bench-run --max-steps 200` (a few minutes; a weak model, but the
same code path).

The decoding.json figures (only for a run whose decoding.json splits or repairs): every 7th valid pair of its
corpus (all sources of `software`, mostly multi-sentence paragraphs outside LibreOffice), beam 4 at the file's
alpha, translated with and without the text-level options (`engines.Translator`: the pipeline of any engine's
path), interleaved, the median of --repeats rounds (default 3).
"""

from __future__ import annotations

import argparse
import subprocess
import sys
from pathlib import Path

from benchlib import ROOT, add_common_args, emit, interleave, log, median, setup_threads

from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
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
    decoding_file_figures(run, corpus, args.sentences, args.repeats or (1 if args.quick else 3), threads)


def decoding_file_figures(run, corpus: str, sentences: int, repeats: int, threads: int) -> None:
    """Time and BLEU of the run's decoding.json options against whole lines, same beam and alpha, interleaved."""
    d = run.decoding
    if not d.text_level():
        log("bench_quality: the run's decoding.json neither splits nor repairs: no decoding.json figures")
        return
    pairs = load_pairs(corpus, "valid", on_error="skip")[::7][:sentences]
    texts, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator(run, run.decoding.pick(engine="torch"))  # the run's decoding.json, on our own decoder
    outputs = {}

    def with_file() -> None:
        outputs["file"] = translator.translate(texts, beam=4)

    def whole() -> None:
        outputs["whole"] = translator.translate(texts, beam=4, split_sentences=False, repair_copies=False)

    times = interleave({"file": with_file, "whole": whole}, repeats)
    note = (f"{len(pairs)} valid pairs of {corpus} (every 7th), beam 4, alpha {d.alpha}; decoding.json: "
            f"{', '.join(d.text_level())}")
    emit("decoding.json: translation time, its options vs whole lines", "s", median(times["file"]),
         median(times["whole"]), "ours, whole lines", higher_is_better=False,
         note=f"{note}; median of {repeats} interleaved rounds", threads=threads)
    b = {name: bleu(out, refs) for name, out in outputs.items()}
    emit("decoding.json: BLEU, its options vs whole lines", "BLEU", b["file"]["score"], b["whole"]["score"],
         "ours, whole lines", note=f"{note}; {b['file']['signature']}", threads=threads)


if __name__ == "__main__":
    main()

#!/usr/bin/env python3
"""Issue 31's second lever, measured before it is built: the ATen ops around the captured step at greedy batch 1,
from torch.profiler over one `translate` call of the first `--sentences` test sentences, one at a time (the
packages must be in this user's cache: run `scratchformer translate models/en-zh --step captured` once first).
The AOTInductor step's own kernels do not show as ATen ops; the views its runtime makes around them do.

    PYTHONPATH=src .venv/bin/python experiments/decode-capture/step_ops.py [--sentences 16] [--rows 25]

A study: nothing here is shipped. The profiler adds its own cost to every op, so read the counts and the ranking,
and the times as upper bounds.
"""

from __future__ import annotations

import argparse
from pathlib import Path

import torch
from torch.profiler import profile

from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.corpus import load_pairs
from scratchformer.engines import Translator
from scratchformer.runs import load_run

ROOT = Path(__file__).resolve().parents[2]


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    p.add_argument("--run-dir", type=Path, default=ROOT / "models" / "en-zh")
    p.add_argument("--sentences", type=int, default=16)
    p.add_argument("--rows", type=int, default=25, help="rows of the op table")
    p.add_argument("--beam", type=int, default=1, help="beam width (1: greedy)")
    p.add_argument("--batch", type=int, default=1, help="sentences per batch")
    args = p.parse_args()
    torch.set_num_threads(1)
    run = load_run(args.run_dir)
    texts = [s for s, _ in load_pairs(run.train_config.corpus, "test", on_error="skip")[: args.sentences]]
    translator = Translator(run, DecodingOptions(beam=args.beam, step="captured", batch_size=args.batch, alpha=0.6))
    translator.translate(texts)  # loads the packages, warms the caches
    with profile() as prof:
        translator.translate(texts)
    print(prof.key_averages().table(sort_by="self_cpu_time_total", row_limit=args.rows))


if __name__ == "__main__":
    main()

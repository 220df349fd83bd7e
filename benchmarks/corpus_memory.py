#!/usr/bin/env python3
"""Peak memory of reading a corpus for training, against its size (issue 42, finding 10).

    .venv/bin/python benchmarks/corpus_memory.py [--lines 10000,100000,300000] [--kind bpe] [--steps 0]

For each size: a gzipped TSV of that many lines (an English sentence, a TAB, a Chinese one; numbered, so no two
are alike) in a temporary folder, then one child process per size that does what `train` does with a corpus before
the first step: `load_pairs(..., holdout="hash")` of the train split, the source and target tokenizers trained on
it (--kind for the source side, char for the target) and `encode_pairs`. With --steps N the child runs
`scratchformer train --max-steps N` on the file instead (torch and a model on top). The child reports its peak
resident memory (`resource.getrusage(RUSAGE_SELF).ru_maxrss`); the line printed per size is the corpus' lines,
compressed and expanded bytes, the peak, the peak above an empty corpus's, and that difference per line and per
expanded byte. The bound these figures support is stated in docs/robustness.md ("A corpus's size"); the cap that
keeps a gzip bomb from expanding is data/corpus.py's MAX_CORPUS_BYTES / MAX_CORPUS_LINES.

Nothing is written outside the temporary folder; keep the sizes small on a shared machine.
"""

from __future__ import annotations

import argparse
import gzip
import json
import os
import subprocess
import sys
import tempfile
from pathlib import Path

SRC = Path(__file__).resolve().parents[1] / "src"

CHILD = r"""
import json, resource, sys, warnings
warnings.simplefilter("ignore")
from scratchformer.data.batching import encode_pairs
from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import train_tokenizer
path, kind = sys.argv[1], sys.argv[2]
pairs = load_pairs(path, "train", holdout="hash")
src = train_tokenizer(kind, [s for s, _ in pairs], 8000)
tgt = train_tokenizer("char", [t for _, t in pairs])
examples = encode_pairs(pairs, src, tgt, 256)
print(json.dumps({"pairs": len(pairs), "examples": len(examples),
                  "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""

TRAIN = r"""
import resource, runpy, sys, json
sys.argv = ["scratchformer", *sys.argv[1:]]
try:
    runpy.run_module("scratchformer", run_name="__main__")
except SystemExit as e:
    code = e.code
print(json.dumps({"code": code, "peak_kb": resource.getrusage(resource.RUSAGE_SELF).ru_maxrss}))
"""


def write_corpus(path: Path, lines: int) -> None:
    with gzip.open(path, "wt", encoding="utf-8", compresslevel=6) as f:
        for i in range(lines):
            f.write(f"the quick brown fox number {i} jumps over the lazy dog\t敏捷的棕色狐狸 {i} 跳过了懒狗\n")


def measure(path: Path, kind: str, steps: int, work: Path) -> dict:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1", "RAYON_NUM_THREADS": "1", "HOME": str(work),
           "XDG_CACHE_HOME": str(work / "cache"), "TMPDIR": str(work), "SCRATCHFORMER_AUTOTUNE": "0"}
    if steps:
        out = work / f"run-{path.stem}"
        args = [sys.executable, "-c", TRAIN, "train", "--recipe", "toy", "--corpus", str(path), "--max-steps",
                str(steps), "eval_every=0", "bleu_samples=0", "--quiet", "--no-test", "--out", str(out)]
    else:
        args = [sys.executable, "-c", CHILD, str(path), kind]
    proc = subprocess.run(args, env=env, capture_output=True, text=True, cwd=work)
    if proc.returncode != 0:
        raise SystemExit(proc.stderr[-2000:])
    return json.loads(proc.stdout.strip().splitlines()[-1])


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    p.add_argument("--lines", default="10000,100000,300000", help="corpus sizes, comma-separated")
    p.add_argument("--kind", default="bpe", help="the source tokenizer (train's default: bpe)")
    p.add_argument("--steps", type=int, default=0, help="0: the corpus and tokenizer path only; N: train N steps")
    args = p.parse_args()
    sizes = [int(n) for n in args.lines.split(",")]
    with tempfile.TemporaryDirectory(prefix="corpus-memory-") as tmp:
        work = Path(tmp)
        empty = work / "empty.tsv.gz"
        write_corpus(empty, 30)  # a corpus small enough to cost nothing: the baseline (imports, the tokenizers)
        base = measure(empty, args.kind, args.steps, work)["peak_kb"] * 1024
        print(f"baseline (30 lines): peak {base / 2**20:.0f} MiB")
        print(f"{'lines':>9} {'gz bytes':>10} {'bytes':>11} {'peak MiB':>9} {'above MiB':>9} {'B/line':>7} "
              f"{'x bytes':>7}")
        for n in sizes:
            path = work / f"c{n}.tsv.gz"
            write_corpus(path, n)
            with gzip.open(path, "rb") as f:
                expanded = sum(len(chunk) for chunk in iter(lambda: f.read(1 << 20), b""))
            peak = measure(path, args.kind, args.steps, work)["peak_kb"] * 1024
            above = peak - base
            print(f"{n:>9} {path.stat().st_size:>10} {expanded:>11} {peak / 2**20:>9.0f} {above / 2**20:>9.0f} "
                  f"{above / n:>7.0f} {above / expanded:>7.1f}", flush=True)


if __name__ == "__main__":
    main()

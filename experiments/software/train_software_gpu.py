"""The `software` recipe on one CUDA GPU in under 10 minutes of device time: train (bf16 autocast, `--dtype auto`
takes it on CUDA), average the last 5 checkpoints, score every source's test split with beam 4. Prepared for a lent
GPU (the `device` tool); the CPU run of the same recipe is the long run in
experiments/software/README.md.

    .venv/bin/python experiments/software/train_software_gpu.py --out runs/software-gpu [--minutes 7]
    .venv/bin/python experiments/software/train_software_gpu.py --smoke --out /tmp/smoke   # on the CPU, seconds

Prints one JSON line per phase (train, average, one per source) and writes them to OUT/gpu_run.jsonl.
--smoke runs the same steps on the CPU with the toy recipe and 4 updates, scoring one source greedily: the test
suite runs it, so the script is known to work before a GPU is lent (its figures mean nothing).
"""

from __future__ import annotations

import argparse
import json
import sys
import time
from pathlib import Path

sys.path.insert(0, str(Path(__file__).resolve().parents[2] / "scripts"))  # eval_software, a tool of scripts/

import eval_software  # noqa: E402

from scratchformer.cli import main as cli  # noqa: E402


def plan(out: Path, minutes: float, smoke: bool) -> dict:
    """The commands the run makes, as argument lists (CPU-independent, so tests can read them)."""
    if smoke:
        train = ["train", "--recipe", "toy", "device=cpu", "--max-steps", "4", "eval_every=2",
                 "save_every=1", "--out", str(out), "--quiet"]
        return {"train": train, "sources": ["django"], "beam": 1, "limit": 5}
    train = ["train", "--recipe", "software", "device=cuda", f"time_limit={minutes}", "--out", str(out),
             "--quiet"]
    return {"train": train, "sources": eval_software.sources(), "beam": 4, "limit": None}


def main(argv: list[str] | None = None) -> int:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("--out", type=Path, required=True, help="the run directory to create")
    ap.add_argument("--minutes", type=float, default=7.0, help="training time limit (default 7: start-up and "
                    "scoring fit in the rest of 10 minutes)")
    ap.add_argument("--smoke", action="store_true", help="the toy recipe on the CPU, 4 updates")
    args = ap.parse_args(argv)
    if not args.smoke:
        import torch

        if not torch.cuda.is_available():
            print("error: no CUDA GPU here; this script is for a lent GPU (--smoke runs its steps on the CPU)",
                  file=sys.stderr)
            return 2
    p = plan(args.out, args.minutes, args.smoke)
    lines: list[dict] = []

    def emit(record: dict) -> None:
        lines.append(record)
        print(json.dumps(record, ensure_ascii=False), flush=True)

    start = time.perf_counter()
    if cli(p["train"]) != 0:
        return 1
    metrics = [json.loads(x) for x in (args.out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [m for m in metrics if m["kind"] == "train"]
    valid = [m for m in metrics if m["kind"] == "valid"]
    emit({"phase": "train", "steps": max((m["step"] for m in metrics), default=0),
          "seconds": round(time.perf_counter() - start),
          "tokens_per_s": train[-1]["tokens_per_s"] if train else None,
          "best_valid_nll": min((m["valid_nll"] for m in valid), default=None)})
    if cli(["average", str(args.out), "--last", "5"]) != 0:
        return 1
    averaged = args.out / "averaged.safetensors"
    emit({"phase": "average", "weights": averaged.name, "exists": averaged.is_file()})
    scores = eval_software.score_sources(args.out, "test", p["beam"], averaged if averaged.is_file() else None,
                                         p["sources"], p["limit"])
    for source, r in scores.items():
        emit({"phase": "test", "source": source, "beam": p["beam"],
              **{k: r.get(k) for k in ("bleu", "chrf", "spurious_quote_rate", "sentences")}})
    with (args.out / "gpu_run.jsonl").open("w", encoding="utf-8") as f:
        f.writelines(json.dumps(x, ensure_ascii=False) + "\n" for x in lines)
    return 0


if __name__ == "__main__":
    sys.exit(main())

#!/usr/bin/env python3
"""The model-size sweep behind `--recipe software`: a few sizes trained the same number of updates on the
`software` corpus, compared by validation loss and by measured time per update.

    .venv/bin/python experiments/software/sweep_software.py              # runs/sweep/<size>/, then a table
    .venv/bin/python experiments/software/sweep_software.py --steps 500  # the budget per size (updates)

Resumable: a size already measured at this budget in sweep_software.jsonl beside this file (committed, so it
survives a new checkout) or with a finished run (runs/sweep/SIZE/summary.json) is skipped; an interrupted run is
continued with --resume. Every size uses the recipe's data, tokenizers and schedule; only the model differs. Prints
one JSON line per size and appends each new one to that file.
"""

from __future__ import annotations

import argparse
import json
import subprocess
import sys
import time
from pathlib import Path

SIZES = {  # ModelConfig overrides of the demo preset (tied embeddings, as the shipped model)
    "d256-3x3": {},
    "d256-4x4": {"n_encoder_layers": 4, "n_decoder_layers": 4},
    "d384-4x4": {"d_model": 384, "n_heads": 6, "d_ff": 1536, "n_encoder_layers": 4, "n_decoder_layers": 4},
}
COMMON = ["--corpus", "software", "--preset", "demo", "warmup=250", "lr_factor=0.5", "max_tokens=4096",
          "eval_every=0", "save_every=100", "bleu_samples=200", "log_every=25",
          "--quiet", "--no-test", "tie_embeddings=true"]


def run_size(name: str, overrides: dict, steps: int, root: Path) -> dict:
    out = root / name
    summary_file = out / "summary.json"
    if summary_file.exists():
        return json.loads(summary_file.read_text())
    resume = (out / "checkpoints").is_dir()
    args = [sys.executable, "-m", "scratchformer", "train", "--out", str(out), "--max-steps", str(steps), *COMMON,
            *[f"{k}={v}" for k, v in overrides.items()]]
    if resume:
        args.append("--resume")
    start = time.time()
    proc = subprocess.run(args, capture_output=True, text=True)
    if proc.returncode != 0:
        raise SystemExit(f"{name}: training failed ({proc.returncode}): {proc.stderr.strip()[-2000:]}")
    result = json.loads(proc.stdout.strip().splitlines()[-1])
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in records if r.get("kind") == "train"]
    from scratchformer import ModelConfig, build_model

    params = build_model(ModelConfig.load(out / "config.json")).num_parameters()
    summary = {"size": name, "overrides": overrides, "params_M": round(params / 1e6, 2), "steps": result["step"],
               "valid_nll": round(result["valid_nll"], 4), "valid_ppl": round(result["valid_ppl"], 2),
               "valid_bleu_200": result.get("bleu"), "s_per_update": round(result["elapsed_s"] / result["step"], 2),
               "train_loss_last": round(train[-1]["loss"], 4) if train else None,
               "wall_s_this_call": round(time.time() - start, 1)}
    summary_file.write_text(json.dumps(summary) + "\n")
    return summary


def measured(results: Path, steps: int) -> dict[str, dict]:
    """Sizes already measured at this budget, from the committed results file."""
    if not results.exists():
        return {}
    rows = [json.loads(line) for line in results.read_text().splitlines() if line.strip()]
    return {r["size"]: r for r in rows if r.get("steps") == steps}


def main() -> None:
    p = argparse.ArgumentParser(description=__doc__.splitlines()[0])
    p.add_argument("--steps", type=int, default=500)
    p.add_argument("--root", type=Path, default=Path("runs/sweep"))
    p.add_argument("--results", type=Path, default=Path(__file__).resolve().parent / "sweep_software.jsonl")
    p.add_argument("--sizes", nargs="*", default=list(SIZES), choices=list(SIZES))
    a = p.parse_args()
    a.root.mkdir(parents=True, exist_ok=True)
    done = measured(a.results, a.steps)
    for name in a.sizes:
        summary = done.get(name) or run_size(name, SIZES[name], a.steps, a.root)
        print(json.dumps(summary), flush=True)
        if name not in done:
            with open(a.results, "a", encoding="utf-8") as f:
                f.write(json.dumps(summary) + "\n")


if __name__ == "__main__":
    main()

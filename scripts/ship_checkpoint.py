"""Package a trained run as the shipped checkpoint (models/en-zh): the better of the best-on-validation weights
and the average of the last 5 checkpoints (as the paper does), chosen by validation BLEU, stored in float16
(half the bytes; loading casts back to float32), with its configs, tokenizers, curve and measured scores.

    python scripts/ship_checkpoint.py runs/long models/en-zh
    python scripts/ship_checkpoint.py runs/software models/en-zh --command "scratchformer train --recipe software ..."

Validation and test pairs come from the corpus the run was trained on (its train_config.json), or --corpus.

README.json's "headline" is the model's one BLEU figure, with its split, sentence count, decoding and signature:
the test split of its corpus, greedy, with the model's decoding.json, i.e. what `scratchformer evaluate en-zh`
prints, and what `make demo` measures again. Once decoding.json is chosen, measure it again alone:

    python scripts/ship_checkpoint.py --headline models/en-zh
"""

from __future__ import annotations

import argparse
import json
import platform
import shutil
import subprocess
from pathlib import Path

import torch

from scratchformer import runs
from scratchformer.data.corpus import load_pairs
from scratchformer.evaluation.translation import evaluate_pairs, evaluate_run
from scratchformer.runs import load_run
from scratchformer.training import checkpoint as ckpt

HEADLINE_ARGS = ["--split", "test", "--beam", "1"]  # `scratchformer evaluate MODEL` with these: the headline


def headline(model: Path) -> dict:
    """The shipped model's one BLEU figure (see the module docstring), measured now."""
    result = evaluate_run(model, split="test", beam=1)
    options = [name for name in ("split_sentences", "repair_copies") if result.get(name)]
    decoding = (f"greedy (beam 1), alpha {result.get('alpha')}"
                + (f", {', '.join(options)}" if options else "")
                + (" (its decoding.json)" if (model / "decoding.json").exists() else " (no decoding.json)"))
    return {"bleu": result["bleu"], "chrf": result["chrf"], "split": f"{result['corpus']} test",
            "sentences": result["sentences"], "decoding": decoding, "bleu_signature": result["bleu_signature"],
            "command": f"scratchformer evaluate {model.name} {' '.join(HEADLINE_ARGS)}", "args": HEADLINE_ARGS}


def write_headline(model: Path) -> None:
    """README.json's "headline" of `model` measured again, the rest of README.json kept."""
    meta = json.loads((model / "README.json").read_text(encoding="utf-8"))
    meta["headline"] = headline(model)
    runs.write_json(model / "README.json", meta)
    print(json.dumps(meta["headline"], indent=1, ensure_ascii=False))


def main() -> None:
    ap = argparse.ArgumentParser()
    ap.add_argument("run_dir", type=Path, nargs="?")
    ap.add_argument("out", type=Path, nargs="?")
    ap.add_argument("--headline", type=Path, metavar="MODEL",
                    help="only measure README.json's headline of the shipped MODEL again (e.g. models/en-zh)")
    ap.add_argument("--valid-limit", type=int, default=500, help="valid pairs that choose the weights (0: all)")
    ap.add_argument("--corpus", help="corpus of the valid/test splits (default: the one the run was trained on)")
    ap.add_argument("--command", default="scratchformer train --recipe long --out runs/long  (resumed once with "
                    "--resume time_limit=115 --max-steps 12000)", help="how the run was trained (README.json)")
    args = ap.parse_args()
    if args.headline:
        write_headline(args.headline)
        return
    if args.run_dir is None or args.out is None:
        ap.error("give RUN_DIR and OUT (or --headline MODEL)")
    run_dir, out = args.run_dir, args.out
    trained = load_run(run_dir).train_config
    corpus = args.corpus or (trained.corpus if trained else "en-zh")

    candidates = {"best": run_dir / "model.safetensors"}
    if len(runs.list_checkpoints(run_dir)) >= 2:
        last, avg_path = ckpt.average_last(run_dir, 5)
        candidates["average of " + ", ".join(p.name for p in last)] = avg_path
    valid = load_pairs(corpus, "valid")[: args.valid_limit or None]
    scores = {}
    for name, path in candidates.items():
        scores[name] = evaluate_pairs(load_run(run_dir, path), valid, beam=1)["bleu"]
        print(f"valid BLEU (greedy, {len(valid)} sentences) of {name}: {scores[name]}")
    chosen = max(scores, key=scores.get)

    out.mkdir(parents=True, exist_ok=True)
    if (out / "decoding.json").exists():  # chosen for the weights it replaces: the new ones decode with the defaults
        for member in runs.load_decoding(out).ensemble:  # members of the old model's ensemble go with it
            (out / member).unlink(missing_ok=True)
        (out / "decoding.json").unlink()
        print(f"removed {out / 'decoding.json'} (the old weights' decoding); choose the new model's on valid")
    run = load_run(run_dir, candidates[chosen])
    runs.save_weights(run.model, out / "model.safetensors", dtype=torch.float16)
    for name in ("config.json", "train_config.json", "tokenizer_src.json", "tokenizer_tgt.json", "metrics.jsonl",
                 "curve.png"):
        if (run_dir / name).exists():
            shutil.copy(run_dir / name, out / name)
    shipped = load_run(out)
    test_pairs = load_pairs(corpus, "test")
    results = {b: evaluate_pairs(shipped, test_pairs, beam=b) for b in (1, 4)}
    records = [json.loads(x) for x in (run_dir / "metrics.jsonl").read_text().splitlines() if x.strip()]
    train = [r for r in records if r["kind"] == "train"]
    cpu = subprocess.run(["bash", "-c", "lscpu | grep 'Model name' | cut -d: -f2"], capture_output=True,
                         text=True).stdout.strip()
    meta = {
        "command": args.command, "corpus": corpus,
        "weights": chosen, "valid_bleu_by_candidate": scores,
        "steps": max(r["step"] for r in records) if records else None,
        "training_minutes": round(train[-1]["elapsed_s"] / 60, 1) if train else None,
        "device": f"CPU: {cpu} ({platform.machine()}), 2 cores, shared with other jobs",
        "test": {f"beam{b}": {k: r[k] for k in ("bleu", "chrf", "sentences", "seconds", "bleu_signature")}
                 for b, r in results.items()},
        "test_decoding": "beam 1 and 4, alpha 0.6, whole lines, no copy repair (the defaults, before a "
                         "decoding.json is chosen)",
        "stored_dtype": "float16",
        "headline": headline(out),
    }
    if corpus == "software":  # its test split per source (scripts/eval_software.py), beam 4
        import eval_software  # beside this script

        meta["test_by_source"] = {
            source: {k: r[k] for k in ("bleu", "chrf", "sentences", "spurious_quote_rate")}
            for source, r in eval_software.score_sources(out).items()
        }
    runs.write_json(out / "README.json", meta)
    print(json.dumps(meta, indent=1, ensure_ascii=False))


if __name__ == "__main__":
    main()

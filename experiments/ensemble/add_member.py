"""Add a second trained run to a shipped model as an ensemble member: the average of its last checkpoints, stored
in float16 beside model.safetensors and named in decoding.json's `ensemble` (decoding/ensemble.py). translate,
evaluate and serve (--engine torch) then decode both, averaging their probabilities.

    python experiments/ensemble/add_member.py runs/software-seed2 models/en-zh --name member-2.safetensors

The run must share the model's vocabularies (byte-identical tokenizer files) and shape (config.json): a member is a
second training of the same model, such as a fine-tune with another seed. Choose it on validation first
(scripts/eval_software.py MODEL --split valid --ensemble RUN/averaged.safetensors).
"""

from __future__ import annotations

import argparse
import json
from pathlib import Path

import torch

from scratchformer import runs
from scratchformer.config.decoding import check_members
from scratchformer.errors import ScratchformerError
from scratchformer.runs import load_decoding, load_run, save_decoding
from scratchformer.training import checkpoint as ckpt


def add_member(run_dir: Path, model_dir: Path, name: str, last: int = 5) -> Path:
    """Write `name` (float16) into model_dir from run_dir's average of its last `last` checkpoints (its
    model.safetensors when it has fewer than 2) and list it in decoding.json; returns the file written."""
    for file in ("tokenizer_src.json", "tokenizer_tgt.json"):
        if (run_dir / file).read_bytes() != (model_dir / file).read_bytes():
            raise ScratchformerError(f"{run_dir / file} differs from {model_dir / file}: an ensemble member must "
                                     "share the model's vocabularies")
    if json.loads((run_dir / "config.json").read_text()) != json.loads((model_dir / "config.json").read_text()):
        raise ScratchformerError(f"{run_dir}/config.json differs from {model_dir}'s: a member has the model's shape")
    decoding = load_decoding(model_dir)
    members = [*decoding.ensemble, name]
    check_members(members, runs.names.WEIGHTS)
    weights = run_dir / "model.safetensors"
    if len(runs.list_checkpoints(run_dir)) >= 2:
        _, weights = ckpt.average_last(run_dir, last)
    runs.save_weights(load_run(run_dir, weights).model, model_dir / name, dtype=torch.float16)
    save_decoding(model_dir, decoding.pick(ensemble=members))
    return model_dir / name


def main() -> None:
    ap = argparse.ArgumentParser(description=__doc__.split("\n\n")[0])
    ap.add_argument("run_dir", type=Path)
    ap.add_argument("model_dir", type=Path)
    ap.add_argument("--name", default="member-2.safetensors", help="the member's file name in MODEL_DIR")
    ap.add_argument("--last", type=int, default=5, help="checkpoints averaged (the paper: 5)")
    args = ap.parse_args()
    try:
        path = add_member(args.run_dir, args.model_dir, args.name, args.last)
    except ScratchformerError as e:
        ap.exit(2, f"{ap.prog}: error: {e}\n")
    print(f"wrote {path}; {args.model_dir / 'decoding.json'} ensemble: {load_decoding(args.model_dir).ensemble}")


if __name__ == "__main__":
    main()

"""`scratchformer consolidate RUN_DIR`: merge the shards of an FSDP checkpoint into one model.safetensors.

Training with `--fsdp` under torchrun writes checkpoints/step-N/dcp/ (one shard file per rank); translate,
evaluate and `load_run` read a single safetensors file. Consolidation needs one process and no GPU.
"""

from __future__ import annotations

import argparse
import json


def cmd_consolidate(args: argparse.Namespace) -> int:
    """Write the consolidated weights and print where, as JSON."""
    from scratchformer.training.fsdp import consolidate

    path = consolidate(args.run_dir, step=args.step, out=args.out, overwrite=args.overwrite)
    print(json.dumps({"run_dir": args.run_dir, "weights": str(path)}))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `consolidate` subcommand."""
    p = sub.add_parser("consolidate", help="merge an FSDP checkpoint's shards into one model.safetensors")
    p.add_argument("run_dir")
    p.add_argument("--step", type=int, help="checkpoint step (default: the latest sharded checkpoint)")
    p.add_argument("--out", help="output file (default RUN_DIR/checkpoints/step-N/model.safetensors; never one of "
                   "a run's own files)")
    p.add_argument("--overwrite", action="store_true", help="replace the file --out names if it exists")
    p.set_defaults(func=cmd_consolidate)

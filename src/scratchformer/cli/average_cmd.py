"""`scratchformer average RUN_DIR`: average the weights of the last checkpoints, as the paper does. Wiring only:
the averaging and the file written are `training.checkpoint.average_last`'s."""

from __future__ import annotations

import argparse


def cmd_average(args: argparse.Namespace) -> int:
    """Average the last --last checkpoints into --out (default RUN_DIR/averaged.safetensors) and say which."""
    from scratchformer.training.checkpoint import average_last

    paths, out = average_last(args.run_dir, args.last, args.out, overwrite=args.overwrite)
    print(f"averaged {', '.join(p.name for p in paths)} -> {out}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `average` subcommand."""
    p = sub.add_parser("average", help="average the weights of the last N checkpoints (the paper uses 5)")
    p.add_argument("run_dir")
    p.add_argument("--last", type=int, default=5)
    p.add_argument("--out", help="output file (default RUN_DIR/averaged.safetensors; never one of the run's own files)")
    p.add_argument("--overwrite", action="store_true", help="replace the file --out names if it exists")
    p.set_defaults(func=cmd_average)

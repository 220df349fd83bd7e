"""`scratchformer shapes`: one forward pass with every module's input/output shapes, wiring only."""

from __future__ import annotations

import argparse

from scratchformer.cli.common import add_model_args, config_from_args
from scratchformer.i18n import _


def cmd_shapes(args: argparse.Namespace) -> int:
    """Print the shape report of one forward pass of the configured model (dropout off)."""
    from scratchformer.inspect.shapes import check_sizes, shape_report
    from scratchformer.model import build_model

    config = config_from_args(args).replace(dropout=0.0)
    check_sizes(config, args.batch, args.src_len, args.tgt_len,
                flags={"batch": "--batch", "src_len": "--src-len", "tgt_len": "--tgt-len"})
    model = build_model(config)
    print(shape_report(model, args.batch, args.src_len, args.tgt_len, args.all_layers))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `shapes` subcommand."""
    p = sub.add_parser("shapes", help="one forward pass, every module's input/output shapes with named dims")
    add_model_args(p)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--src-len", type=int, default=10, help=_("source length (or sequence length)"))
    p.add_argument("--tgt-len", type=int, default=9)
    p.add_argument("--all-layers", action="store_true", help=_("trace inside every layer, not only layer 0"))
    p.set_defaults(func=cmd_shapes)

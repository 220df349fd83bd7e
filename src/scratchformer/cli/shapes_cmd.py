"""`scratchformer shapes`: one forward pass with every module's input/output shapes, wiring only."""

from __future__ import annotations

import argparse

from scratchformer.cli.common import add_model_args, config_from_args
from scratchformer.errors import InputError
from scratchformer.i18n import _


def cmd_shapes(args: argparse.Namespace) -> int:
    """Print the shape report of one forward pass of the configured model (dropout off)."""
    from scratchformer.inspect.shapes import check_sizes, shape_report
    from scratchformer.model import build_model

    config = config_from_args(args).replace(dropout=0.0)
    src_len, tgt_len = _lengths(args.lengths)
    check_sizes(config, args.batch, src_len, tgt_len,
                flags={"batch": "--batch", "src_len": "--lengths", "tgt_len": "--lengths"})
    model = build_model(config)
    print(shape_report(model, args.batch, src_len, tgt_len, args.all_layers))
    return 0


def _lengths(text: str) -> tuple[int, int]:
    """--lengths '10,9' -> (10, 9), '12' -> (12, 12), or a one-line InputError."""
    parts = text.split(",")
    try:
        if len(parts) in (1, 2):
            return int(parts[0]), int(parts[-1])
    except ValueError:
        pass
    raise InputError("--lengths {text}: give SRC,TGT (e.g. 10,9) or one length for both", text=text)


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `shapes` subcommand."""
    p = sub.add_parser("shapes", help="one forward pass, every module's input/output shapes with named dims")
    add_model_args(p)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--lengths", default="10,9", metavar="SRC,TGT",
                   help=_("source and target lengths (a single-stack model: the first is its sequence length; one "
                          "number: both) (default: 10,9)"))
    p.set_defaults(retired_flags={"--src-len": "--lengths {value},TGT", "--tgt-len": "--lengths SRC,{value}"})
    p.add_argument("--all-layers", action="store_true", help=_("trace inside every layer, not only layer 0"))
    p.set_defaults(func=cmd_shapes)

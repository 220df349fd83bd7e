"""`scratchformer plot positions`: draw the positional encodings to a PNG, wiring only."""

from __future__ import annotations

import argparse


def cmd_plot(args: argparse.Namespace) -> int:
    """Write the requested picture and say where."""
    from scratchformer.inspect.plots import check_position_sizes, plot_positions

    if args.what == "positions":
        check_position_sizes(args.d_model, args.max_len, flags={"d_model": "--d-model", "max_len": "--max-len"})
        path = plot_positions(args.out, args.d_model, args.max_len)  # an existing directory: DIR/positions.png
        print(f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `plot` subcommand."""
    p = sub.add_parser("plot", help="pictures: positional encodings")
    p.add_argument("what", choices=["positions"])
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--out", required=True, help="output PNG file (an existing directory: DIR/positions.png)")
    p.set_defaults(func=cmd_plot)

"""`scratchformer params | shapes | plot`: look inside a model before (or instead of) training it."""

from __future__ import annotations

import argparse
import json

from scratchformer.cli.common import add_model_args, config_from_args
from scratchformer.config import PAPER_PARAMS_M
from scratchformer.model import build_model


def table3() -> list[dict]:
    """Every Table 3 row with a parameter count: ours, the paper's, and both differences from the base row."""
    from scratchformer.config import ModelConfig
    from scratchformer.inspect.params import closed_form

    base_ours = build_model(ModelConfig.preset("paper-base")).num_parameters()
    rows = []
    for name, paper in PAPER_PARAMS_M.items():
        config = ModelConfig.preset(name)
        ours = base_ours if name == "paper-base" else build_model(config).num_parameters()
        rows.append({"preset": name, "ours_M": round(ours / 1e6, 2), "paper_M": paper,
                     "ours_minus_base_M": round((ours - base_ours) / 1e6, 2),
                     "paper_minus_base_M": paper - PAPER_PARAMS_M["paper-base"],
                     "closed_form_M": round(closed_form(config) / 1e6, 2)})
    return rows


def cmd_params(args: argparse.Namespace) -> int:
    from scratchformer.inspect.params import format_table, parameter_rows, parameter_summary

    if args.table3:
        rows = table3()
        if args.json:
            print(json.dumps(rows))
            return 0
        print(f"{'preset':16s} {'ours':>8s} {'paper':>6s} {'ours-base':>10s} {'paper-base':>11s}")
        for r in rows:
            print(f"{r['preset']:16s} {r['ours_M']:>7.2f}M {r['paper_M']:>5}M {r['ours_minus_base_M']:>+9.2f}M "
                  f"{r['paper_minus_base_M']:>+10}M")
        return 0
    config = config_from_args(args)
    model = build_model(config)
    paper = PAPER_PARAMS_M.get(args.preset) if not args.overrides else None
    if args.json:
        print(json.dumps({"preset": args.preset, **parameter_summary(model, paper)}))
    else:
        print(f"preset {args.preset}: d_model={config.d_model} h={config.n_heads} d_k={config.head_dim_k} "
              f"d_v={config.head_dim_v} d_ff={config.d_ff} N={config.n_encoder_layers}+{config.n_decoder_layers} "
              f"vocab={config.src_vocab_size}/{config.tgt_vocab_size} tied={config.tie_embeddings}\n")
        print(format_table(parameter_rows(model), config, paper))
    return 0


def cmd_shapes(args: argparse.Namespace) -> int:
    from scratchformer.inspect.shapes import check_sizes, shape_report

    config = config_from_args(args).replace(dropout=0.0)
    check_sizes(config, args.batch, args.src_len, args.tgt_len,
                flags={"batch": "--batch", "src_len": "--src-len", "tgt_len": "--tgt-len"})
    model = build_model(config)
    print(shape_report(model, args.batch, args.src_len, args.tgt_len, args.all_layers))
    return 0


def cmd_plot(args: argparse.Namespace) -> int:
    from scratchformer.inspect.plots import check_position_sizes, plot_positions

    if args.what == "positions":
        check_position_sizes(args.d_model, args.max_len, flags={"d_model": "--d-model", "max_len": "--max-len"})
        path = plot_positions(args.out, args.d_model, args.max_len)  # an existing directory: DIR/positions.png
        print(f"wrote {path}")
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("params", help="parameter table per component, with the closed-form estimate")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help='print {"total": N, ...} as JSON')
    p.add_argument("--table3", action="store_true", help="all Table 3 rows beside the paper's parameter column")
    p.set_defaults(func=cmd_params)

    p = sub.add_parser("shapes", help="one forward pass, every module's input/output shapes with named dims")
    add_model_args(p)
    p.add_argument("--batch", type=int, default=2)
    p.add_argument("--src-len", type=int, default=10, help="source length (or sequence length)")
    p.add_argument("--tgt-len", type=int, default=9)
    p.add_argument("--all-layers", action="store_true", help="trace inside every layer, not only layer 0")
    p.set_defaults(func=cmd_shapes)

    p = sub.add_parser("plot", help="pictures: positional encodings")
    p.add_argument("what", choices=["positions"])
    p.add_argument("--d-model", type=int, default=128)
    p.add_argument("--max-len", type=int, default=100)
    p.add_argument("--out", required=True, help="output PNG file (an existing directory: DIR/positions.png)")
    p.set_defaults(func=cmd_plot)

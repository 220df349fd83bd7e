"""`scratchformer params`: the parameter table of a model per component (or Table 3's rows), wiring only."""

from __future__ import annotations

import argparse
import json

from scratchformer.cli.common import add_model_args, config_from_args
from scratchformer.i18n import _, pad, width


def cmd_params(args: argparse.Namespace) -> int:
    """Print the parameter table of the configured model, or every Table 3 row with --table3."""
    from scratchformer.config import PAPER_PARAMS_M
    from scratchformer.inspect.params import format_table, parameter_rows, parameter_summary, table3
    from scratchformer.model import build_model

    if args.table3:
        rows = table3()
        if args.json:
            print(json.dumps(rows))
            return 0
        labels = [_("preset"), _("ours"), _("paper"), _("ours-base"), _("paper-base")]
        cols = [max(w, width(label)) for w, label in zip((16, 8, 6, 10, 11), labels)]  # a wider label widens its column
        print(" ".join(pad(label, w, i > 0) for i, (label, w) in enumerate(zip(labels, cols))))
        for r in rows:
            cells = [r["preset"], f"{r['ours_M']:.2f}M", f"{r['paper_M']}M", f"{r['ours_minus_base_M']:+.2f}M",
                     f"{r['paper_minus_base_M']:+}M"]
            print(" ".join(pad(cell, w, i > 0) for i, (cell, w) in enumerate(zip(cells, cols))))
        return 0
    config = config_from_args(args)
    model = build_model(config)
    paper = PAPER_PARAMS_M.get(args.preset) if not args.overrides else None
    if args.json:
        print(json.dumps({"preset": args.preset, **parameter_summary(model, paper)}))
    else:
        print(_("preset {preset}:").format(preset=args.preset)
              + f" d_model={config.d_model} h={config.n_heads} d_k={config.head_dim_k} d_v={config.head_dim_v} "
              f"d_ff={config.d_ff} N={config.n_encoder_layers}+{config.n_decoder_layers} "
              f"vocab={config.src_vocab_size}/{config.tgt_vocab_size} tied={config.tie_embeddings}\n")
        print(format_table(parameter_rows(model), config, paper))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `params` subcommand."""
    p = sub.add_parser("params", help="parameter table per component, with the closed-form estimate")
    add_model_args(p)
    p.add_argument("--json", action="store_true", help=_('print {"total": N, ...} as JSON'))
    p.add_argument("--table3", action="store_true", help=_("all Table 3 rows beside the paper's parameter column"))
    p.set_defaults(func=cmd_params)

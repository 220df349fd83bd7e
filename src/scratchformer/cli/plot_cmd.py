"""`scratchformer plot positions | attention`: draw the positional encodings, or a run's attention of every kind
for one sentence, to a PNG; wiring only."""

from __future__ import annotations

import argparse

from scratchformer.errors import N_, InputError
from scratchformer.i18n import _


def _ints(text: str, flag: str) -> list[int]:
    """'0,1,20,21' -> [0, 1, 20, 21], or a one-line InputError."""
    try:
        return [int(t) for t in text.split(",") if t.strip()]
    except ValueError:
        raise InputError(N_("{flag} {text}: give whole numbers separated by commas, e.g. {flag} 0,1,20,21"),
                         flag=flag, text=text) from None


def _one_or_all(text: str | None, flag: str) -> int | None:
    """'all' or None -> None (every one), '2' -> 2."""
    if text is None or text == "all":
        return None
    if not text.lstrip("-").isdigit():
        raise InputError(N_("{flag} {text}: give a number (1 = the first) or all"), flag=flag, text=text)
    return int(text)


def _target(args: argparse.Namespace, default_name: str):
    """The PNG file to write, checked before any work (runs/folders.py): a NAME without a suffix is NAME.png, an
    existing folder DIR/default_name (not with --overwrite, which names a file); never a run's own file, and an
    existing file only with --overwrite."""
    from pathlib import Path

    from scratchformer.runs.folders import check_file

    out = Path(args.out)
    if not out.is_dir() and not out.suffix:
        out = out.with_name(out.name + ".png")
    return check_file(out, "plot", args.overwrite, default_name=default_name)


_FLAGS = {"d_model": "--d-model", "max_len": "--max-positions"}  # how check_position_sizes names the sizes


def cmd_plot(args: argparse.Namespace) -> int:
    """Write the requested picture and say where."""
    if args.what == "relations":
        from scratchformer.inspect.plots import check_position_sizes, plot_position_relations

        check_position_sizes(args.d_model, args.max_positions, flags=_FLAGS)
        print(_("wrote {path}").format(path=plot_position_relations(args.out, args.d_model, args.max_positions)))
        return 0
    if args.what == "positions":
        from scratchformer.inspect.plots import check_dims, check_position_sizes, plot_positions

        if args.run_dir or args.sentence:
            raise InputError(N_("plot positions takes no run or sentence (give --d-model / --max-positions / --dims)"))
        check_position_sizes(args.d_model, args.max_positions, flags=_FLAGS)
        dims = check_dims(_ints(args.dims, "--dims"), args.d_model) if args.dims is not None else None
        path = plot_positions(_target(args, "positions.png"), args.d_model, args.max_positions, dims)
        print(_("wrote {path}").format(path=path))
        return 0
    if not args.run_dir or not args.sentence:
        raise InputError(N_('plot attention needs a run and a sentence: plot attention RUN_DIR "sentence" --out FILE'))
    from scratchformer.data.language import warn_wrong_language
    from scratchformer.inspect.attention import plot_sentence_attention
    from scratchformer.runs import load_run

    layer, head = _one_or_all(args.layer, "--layer"), _one_or_all(args.head, "--head")
    run = load_run(args.run_dir)
    warn_wrong_language([args.sentence], run.train_config.corpus if run.train_config else None)
    out = _target(args, f"attention-{args.kind}.png")
    translation = args.translation
    if translation is None:  # as `translate` would say it: the run's decoding.json, through the one door
        from scratchformer.engines import Translator

        translation = Translator(run, run.decoding.pick(named_as=frozenset())).translate([args.sentence])[0]
    path = plot_sentence_attention(run, args.sentence, translation, out, args.kind, layer, head)
    print(f"{args.sentence} -> {translation}\n" + _("wrote {path}").format(path=path))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `plot` subcommand."""
    p = sub.add_parser("plot", help="pictures: positional encodings, attention of every kind")
    p.add_argument("what", choices=["positions", "relations", "attention"],
                   help=_("relations: PE(p) . PE(p+k) against k, and PE(p+k) as a rotation of PE(p)"))
    p.add_argument("run_dir", nargs="?", help=_("attention: the run directory"))
    p.add_argument("sentence", nargs="?", help=_("attention: the source sentence (translated as `translate` does)"))
    p.add_argument("--d-model", type=int, default=128, help=_("positions, relations: the model width (default: 128)"))
    p.add_argument("--max-positions", type=int, default=100,
                   help=_("positions, relations: how many positions to draw (default: 100)"))
    p.set_defaults(retired_flags={"--max-len": "--max-positions {value}"})
    p.add_argument("--dims", help=_("positions: dimensions to draw as curves, e.g. 0,1,20,21 (default: 0, D/8, D/4, "
                   "D/2, fast to slow)"))
    p.add_argument("--kind", default="cross", choices=["self", "decoder-self", "cross"],
                   help=_("attention: encoder self-attention, decoder self-attention, or cross-attention"))
    p.add_argument("--layer", help=_("attention: layer number (1 = first) or all (default: all)"))
    p.add_argument("--head", help=_("attention: head number (1 = first) or all (default: all)"))
    p.add_argument("--translation", help=_("attention: draw this target text instead of the model's translation"))
    p.add_argument("--out", required=True, help=_("output PNG file (an existing directory: DIR/positions.png or "
                   "DIR/attention-KIND.png)"))
    p.add_argument("--overwrite", action="store_true", help="replace the file --out names if it exists (never one "
                   "of a run's own files)")
    p.set_defaults(func=cmd_plot)

"""`scratchformer lab NAME [--out DIR] [--quick]` and `lab` alone (the list): the seeds' questions as experiments;
wiring only."""

from __future__ import annotations

import argparse

from scratchformer.i18n import N_, _, pad


def cmd_lab(args: argparse.Namespace) -> int:
    """List the experiments, or run one and print its conclusion and the files it wrote."""
    from scratchformer.cli.common import set_threads
    from scratchformer.lab import EXPERIMENTS, run_experiment

    if args.name is None:  # `lab` alone lists them
        width = max(len(n) for n in EXPERIMENTS)
        for name, (_run, question) in EXPERIMENTS.items():
            print(f"{pad(name, width)}  {_(question)}")
        return 0
    set_threads(args.threads)
    result = run_experiment(args.name, args.out, args.quick, args.run, overwrite=args.overwrite, progress=True)
    print(_(EXPERIMENTS[args.name][1]))
    print(result.conclusion)
    print(_("wrote {figure} and {json} in {seconds} s").format(
        figure=result.figure, json=result.extra["json"], seconds=result.extra["seconds"]))
    return 0


def register(sub: argparse._SubParsersAction) -> None:
    """Add the `lab` subcommand."""
    p = sub.add_parser("lab", help="run one of the experiments that answer the seeds' questions (`lab` lists them)")
    p.add_argument("name", nargs="?", help=_("the experiment (none: list the experiments and the question each "
                                             "answers)"))
    p.add_argument("--out", default="lab", help=_("folder for NAME.png and NAME.json (default: lab)"))
    p.add_argument("--overwrite", action="store_true",
                   help="start --out afresh: delete what lab wrote there (your files are kept and named); without it, "
                   "--out is new, empty, or one lab made, and each experiment adds its files")
    p.add_argument("--quick", action="store_true", help=_("a smaller run, under a minute (the tests use it)"))
    p.add_argument("--run", default=None, help=_("heads: the trained encoder-decoder run (default: models/en-zh)"))
    p.add_argument("--threads", type=int, default=None, help=_(
        "torch CPU threads (default: torch's choice; 1 is fastest for these tiny models on a busy CPU)"))
    p.set_defaults(retired_flags={"--list": N_("scratchformer lab (with no experiment name it lists them)")})
    p.set_defaults(func=cmd_lab)

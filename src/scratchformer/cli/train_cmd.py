"""`scratchformer train`: train a model into a run directory (or resume one). Wiring only: the flags become
settings, and training/launch.py applies their precedence, prepares the run directory and trains.

Precedence: built-in defaults < --recipe < --config FILE < explicit flags. With no arguments it runs the
`demo` recipe: the demo preset on the bundled English-Chinese corpus, a few minutes on a 2-core CPU. Exit status:
0 done, 2 a one-line error (also a loss that became nan), 130 after SIGINT and 143 after SIGTERM (the
checkpoint is saved, the test report skipped).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from pathlib import Path

from scratchformer.cli.common import parse_bool, parse_overrides
from scratchformer.config import RECIPES, TrainConfig
from scratchformer.training.launch import default_recipe, given_settings, launch

_HINTS = typing.get_type_hints(TrainConfig)
_SKIP = {"model"}
_NONE = object()  # `--clip-norm none`: an explicit None, told apart from a flag not given


def _flag_type(hint):
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base is bool:
        parse = parse_bool  # a typo such as `--fsdp ture` is an error, not a silent False
    else:
        parse = base if base in (int, float, str) else str
    if type(None) not in typing.get_args(hint):
        return parse

    def optional(text: str):
        return _NONE if text.lower() in ("none", "null") else parse(text)

    optional.__name__ = getattr(parse, "__name__", "value")  # argparse names the type in its error messages
    return optional


def _flags(args: argparse.Namespace) -> dict:
    """The TrainConfig fields given on the command line (`none` as an explicit None)."""
    flags = {}
    for f in dataclasses.fields(TrainConfig):
        value = getattr(args, f.name, None)
        if f.name not in _SKIP and value is not None:
            flags[f.name] = None if value is _NONE else value
    return flags


def cmd_train(args: argparse.Namespace) -> int:
    recipe = default_recipe(args.recipe, args.config, args.resume, args.task)
    given = given_settings(recipe, args.config, _flags(args), parse_overrides(args.overrides or []))
    out = Path(args.out or f"runs/{recipe or given.get('task', 'translate')}")
    cfg, summary = launch(given, out, resume=args.resume, overwrite=args.overwrite, quiet=args.quiet)
    # SIGINT / SIGTERM: the checkpoint is saved; no test report, and the shell's status for that signal
    status = 128 + summary["signal"] if summary.get("interrupted") and summary.get("signal") else 0
    if summary.pop("is_main", True):
        print(json.dumps({"run_dir": str(out), **summary}, ensure_ascii=False))
        if cfg.task == "translate" and args.test_after and not status:
            from scratchformer.evaluation.translation import evaluate_run

            print(json.dumps(evaluate_run(out, split="test", beam=1, limit=None, show=5), ensure_ascii=False))
    return status


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model (translation by default) into a run directory",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--recipe", choices=sorted(RECIPES), default=None,
                   help="named settings (default when no --config is given: demo, or lm-demo / mlm-demo / "
                        "classify-demo for --task lm / mlm / classify)")
    p.add_argument("--config", help="JSON file of training options (TrainConfig fields)")
    p.add_argument("--out", help="run directory (default runs/<recipe>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="delete an existing run in --out first (only the files training wrote)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-test", dest="test_after", action="store_false", help="skip the test-split report")
    for f in dataclasses.fields(TrainConfig):
        if f.name in _SKIP:
            continue
        p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=_flag_type(_HINTS[f.name]), default=None,
                       help=f"(default {f.default!r})" if f.default is not dataclasses.MISSING else None)
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="model config overrides, e.g. d_model=128")
    p.set_defaults(func=cmd_train)

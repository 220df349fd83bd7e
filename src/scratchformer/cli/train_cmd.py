"""`scratchformer train`: train a model into a run directory (or resume one).

Precedence: built-in defaults < --recipe < --config FILE < explicit flags. With no arguments it runs the
`demo` recipe: the demo preset on the bundled English-Chinese corpus, a few minutes on a 2-core CPU.
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import os
import shutil
import typing
from pathlib import Path

from scratchformer.cli.common import parse_bool, parse_overrides
from scratchformer.errors import ConfigError
from scratchformer.training.config import RECIPES, TrainConfig

_HINTS = typing.get_type_hints(TrainConfig)
DEFAULT_PRESETS = {"lm": "gpt-tiny", "mlm": "bert-tiny", "classify": "bert-tiny"}  # when no preset is given
DEFAULT_RECIPES = {"lm": "lm-demo", "mlm": "mlm-demo", "classify": "classify-demo"}  # else "demo"
_SKIP = {"model"}


def _flag_type(hint):
    args = [a for a in typing.get_args(hint) if a is not type(None)]
    base = args[0] if args else hint
    if base is bool:
        return parse_bool  # a typo such as `--fsdp ture` is an error, not a silent False
    return base if base in (int, float, str) else str


def cmd_train(args: argparse.Namespace) -> int:
    settings: dict = {}
    if args.recipe:
        settings.update(RECIPES[args.recipe])
    if args.config:
        try:
            settings.update(json.loads(Path(args.config).read_text(encoding="utf-8")))
        except FileNotFoundError:
            raise ConfigError(f"--config {args.config} does not exist") from None
        except json.JSONDecodeError as e:
            raise ConfigError(f"--config {args.config} is not valid JSON: {e}") from None
    for f in dataclasses.fields(TrainConfig):
        value = getattr(args, f.name, None)
        if f.name not in _SKIP and value is not None:
            settings[f.name] = value
    if args.overrides:
        settings["model"] = {**settings.get("model", {}), **parse_overrides(args.overrides)}
    if "preset" not in settings and settings.get("task", "translate") in DEFAULT_PRESETS:
        settings["preset"] = DEFAULT_PRESETS[settings["task"]]
    out = Path(args.out or f"runs/{args.recipe or settings.get('task', 'translate')}")
    if out.exists() and (out / "config.json").exists() and not args.resume:
        if not args.overwrite:
            raise ConfigError(f"{out} already holds a run: add --resume to continue it, --overwrite to start over, "
                              "or choose another --out")
        if os.environ.get("RANK", "0") == "0":  # under torchrun only rank 0 deletes (the others would race it)
            shutil.rmtree(out)
    if args.resume and (out / "train_config.json").exists():
        saved = TrainConfig.load(out / "train_config.json").to_dict()
        # accum_steps may change with the world size, to keep the tokens per update (2 ranks -> 1 x accum 2)
        saved.update({k: v for k, v in settings.items()
                      if k in ("max_steps", "time_limit", "max_epochs", "accum_steps")})
        settings = saved
    cfg = TrainConfig.from_dict(settings)
    if cfg.task in ("mlm", "classify"):
        from scratchformer.training.tasks import train_encoder_task

        summary = train_encoder_task(cfg, out, resume=args.resume, quiet=args.quiet)
    else:
        from scratchformer.training.trainer import train

        summary = train(cfg, out, resume=args.resume, quiet=args.quiet)
    if summary.pop("is_main", True):  # under torchrun only rank 0 reports
        print(json.dumps({"run_dir": str(out), **summary}, ensure_ascii=False))
        if cfg.task == "translate" and args.test_after:
            _report_test(out)
    return 0


def _report_test(run_dir: Path) -> None:
    try:
        from scratchformer.evaluation.evaluate import evaluate_run
    except ImportError:
        return
    result = evaluate_run(run_dir, split="test", beam=1, limit=None, show=5)
    print(json.dumps(result, ensure_ascii=False))


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model (translation by default) into a run directory",
                       formatter_class=argparse.ArgumentDefaultsHelpFormatter)
    p.add_argument("--recipe", choices=sorted(RECIPES), default=None,
                   help="named settings (default when no --config is given: demo, or lm-demo / mlm-demo / "
                        "classify-demo for --task lm / mlm / classify)")
    p.add_argument("--config", help="JSON file of training options (TrainConfig fields)")
    p.add_argument("--out", help="run directory (default runs/<recipe>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true", help="delete an existing run in --out first")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--no-test", dest="test_after", action="store_false", help="skip the test-split report")
    for f in dataclasses.fields(TrainConfig):
        if f.name in _SKIP:
            continue
        p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=_flag_type(_HINTS[f.name]), default=None,
                       help=f"(default {f.default!r})" if f.default is not dataclasses.MISSING else None)
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="model config overrides, e.g. d_model=128")
    p.set_defaults(func=_default_recipe(cmd_train))


def _default_recipe(func):
    def wrapped(args: argparse.Namespace) -> int:
        if args.recipe is None and args.config is None and not args.resume:
            args.recipe = DEFAULT_RECIPES.get(args.task, "demo")  # `--task lm` alone: the lm-demo recipe
        return func(args)

    return wrapped

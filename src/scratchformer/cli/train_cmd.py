"""`scratchformer train`: train a model into a run directory (or resume one).

Precedence: built-in defaults < --recipe < --config FILE < explicit flags. With no arguments it runs the
`demo` recipe: the demo preset on the bundled English-Chinese corpus, a few minutes on a 2-core CPU.

Safety: the run directory is locked while training (RUN_DIR/.lock names the holder's pid); --overwrite deletes
only what training wrote, and only in a folder marked as a run (RUN_DIR/.scratchformer-run); --resume applies
the flags that may change (SAFE_ON_RESUME, each change said on stderr) and refuses the others. Exit status:
0 done, 2 a one-line error (also a loss that became nan), 130 after SIGINT and 143 after SIGTERM (the
checkpoint is saved, the test report skipped).
"""

from __future__ import annotations

import argparse
import contextlib
import dataclasses
import json
import os
import shutil
import sys
import tempfile
import typing
from pathlib import Path

from scratchformer.cli.common import parse_bool, parse_overrides
from scratchformer.config import RECIPES, TrainConfig
from scratchformer.errors import ConfigError
from scratchformer.training import checkpoint as ckpt

_HINTS = typing.get_type_hints(TrainConfig)
DEFAULT_PRESETS = {"lm": "gpt-tiny", "mlm": "bert-tiny", "classify": "bert-tiny"}  # when no preset is given
DEFAULT_RECIPES = {"lm": "lm-demo", "mlm": "mlm-demo", "classify": "classify-demo"}  # else "demo"
_SKIP = {"model"}
_NONE = object()  # `--clip-norm none`: an explicit None, told apart from a flag not given
# What --resume may change: how long and how the run goes on, not what is trained. Anything else given with
# --resume must equal the saved train_config.json (it would make a different run).
SAFE_ON_RESUME = ("max_steps", "time_limit", "max_epochs", "accum_steps", "eval_every", "save_every", "log_every",
                  "keep_last", "patience", "bleu_samples", "device", "dtype", "clip_norm", "lr_factor", "compile",
                  "fsdp", "on_error")


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


def _read_config_file(path: str) -> dict:
    """The options of `--config FILE`: a JSON object, or a one-line ConfigError."""
    p = Path(path)
    if p.is_dir():
        raise ConfigError(f"--config {path} is a directory: give a JSON file of training options")
    try:
        data = json.loads(p.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise ConfigError(f"--config {path} does not exist") from None
    except (json.JSONDecodeError, UnicodeDecodeError) as e:
        raise ConfigError(f"--config {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"--config {path} holds a JSON {type(data).__name__}: it must be an object of training "
                          "options, e.g. {\"max_steps\": 2000}")
    return data


def _given_settings(args: argparse.Namespace) -> dict:
    """What this command line asks for: --recipe < --config FILE < explicit flags (and KEY=VALUE overrides)."""
    settings: dict = {}
    if args.recipe:
        settings.update(RECIPES[args.recipe])
    if args.config:
        settings.update(_read_config_file(args.config))
    for f in dataclasses.fields(TrainConfig):
        value = getattr(args, f.name, None)
        if f.name not in _SKIP and value is not None:
            settings[f.name] = None if value is _NONE else value
    if args.overrides:
        settings["model"] = {**settings.get("model", {}), **parse_overrides(args.overrides)}
    return settings


def _prepare_out(out: Path) -> None:
    """--out exists as a writable directory afterwards, or a one-line ConfigError naming it."""
    if out.exists() and not out.is_dir():
        raise ConfigError(f"--out {out} is a file, not a directory: choose another --out")
    try:
        out.mkdir(parents=True, exist_ok=True)
        with tempfile.TemporaryFile(dir=out):
            pass
    except OSError as e:
        raise ConfigError(f"--out {out}: cannot write there ({e.strerror or e}): choose another --out") from None


def _holds_run(out: Path) -> bool:
    return (out / "config.json").exists() or (out / ckpt.MARKER).exists()


def _overwrite(out: Path) -> None:
    """Delete what `scratchformer train` wrote in `out`, and nothing else; refuse folders it did not make."""
    target, here = out.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        raise ConfigError(f"--overwrite {out}: that is the current directory or one of its parents; "
                          "choose a run folder below it")
    if target == Path.home().resolve() or target == Path(target.anchor):
        raise ConfigError(f"--overwrite {out}: refusing to clear the home directory or the file system root; "
                          "choose a run folder")
    if not ckpt.is_marked_run(out):
        raise ConfigError(f"--overwrite {out}: not made by scratchformer train (no {ckpt.MARKER} file): delete it "
                          "yourself or choose another --out")
    kept = []
    for entry in sorted(out.iterdir()):
        if entry.name in ckpt.RUN_ENTRIES:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        elif entry.name != ckpt.LOCK:  # held by this process
            kept.append(entry.name)
    if kept:
        print(f"--overwrite {out}: kept {', '.join(kept)} (not written by scratchformer train)", file=sys.stderr)


def _resumed_config(out: Path, given: dict, is_main: bool) -> TrainConfig:
    """train_config.json of the run, with the flags that are safe to change applied (and said), or a one-line
    ConfigError for a flag that would make a different run."""
    saved = TrainConfig.load(out / "train_config.json").to_dict()
    changed = []
    for key, value in given.items():
        old = saved.get(key)
        if key == "model":
            diff = sorted(k for k, v in value.items() if k not in old or old[k] != v)
            if diff:
                k = diff[0]
                raise ConfigError(f"--resume {out}: model override {k}={value[k]!r} differs from the run's "
                                  f"{old.get(k, '(preset default)')!r}: it would make a different run; drop it, or "
                                  "train a new run into another --out")
            continue
        if value == old and type(value) is type(old):
            continue
        if key not in SAFE_ON_RESUME:
            flag = "--" + key.replace("_", "-")
            raise ConfigError(f"--resume {out}: {flag} {value!r} differs from the run's {old!r}: it would make a "
                              "different run; drop the flag, or train a new run into another --out")
        changed.append(f"{key} {old!r} -> {value!r}")
        saved[key] = value
    if changed and is_main:
        print(f"resume: {'; '.join(changed)}", file=sys.stderr)
    return TrainConfig.from_dict(saved)


def cmd_train(args: argparse.Namespace) -> int:
    given = _given_settings(args)
    settings = dict(given)
    if "preset" not in settings and settings.get("task", "translate") in DEFAULT_PRESETS:
        settings["preset"] = DEFAULT_PRESETS[settings["task"]]
    out = Path(args.out or f"runs/{args.recipe or settings.get('task', 'translate')}")
    cfg = TrainConfig.from_dict(settings)  # bad values fail here, before anything is written
    is_main = os.environ.get("RANK", "0") == "0"  # under torchrun only rank 0 locks, deletes and reports
    _prepare_out(out)
    with ckpt.run_lock(out) if is_main else contextlib.nullcontext():
        if _holds_run(out) and not args.resume:
            if not args.overwrite:
                raise ConfigError(f"{out} already holds a run: add --resume to continue it, --overwrite to start "
                                  "over, or choose another --out")
            if is_main:
                _overwrite(out)
        if args.resume and (out / "train_config.json").exists():
            cfg = _resumed_config(out, given, is_main)
        if cfg.task in ("mlm", "classify"):
            from scratchformer.training.tasks import train_encoder_task

            summary = train_encoder_task(cfg, out, resume=args.resume, quiet=args.quiet)
        else:
            from scratchformer.training.trainer import train

            summary = train(cfg, out, resume=args.resume, quiet=args.quiet)
    # SIGINT / SIGTERM: the checkpoint is saved; no test report, and the shell's status for that signal
    status = 128 + summary["signal"] if summary.get("interrupted") and summary.get("signal") else 0
    if summary.pop("is_main", True):
        print(json.dumps({"run_dir": str(out), **summary}, ensure_ascii=False))
        if cfg.task == "translate" and args.test_after and not status:
            _report_test(out)
    return status


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
    p.set_defaults(func=_default_recipe(cmd_train))


def _default_recipe(func):
    def wrapped(args: argparse.Namespace) -> int:
        if args.recipe is None and args.config is None and not args.resume:
            args.recipe = DEFAULT_RECIPES.get(args.task, "demo")  # `--task lm` alone: the lm-demo recipe
        return func(args)

    return wrapped

"""`scratchformer train`: train a model into a run directory (or resume one). Wiring only: the flags become
settings, and training/launch.py applies their precedence, prepares the run directory and trains.

Precedence: built-in defaults < --recipe < --config FILE < explicit flags and KEY=VALUE settings (any
TrainConfig or ModelConfig field: `train --help` lists them). With no arguments it runs the
`demo` recipe: the demo preset on the bundled English-Chinese corpus, a few minutes on a 2-core CPU. Exit status:
0 done, 2 a one-line error (also a loss that became nan), 130 after SIGINT and 143 after SIGTERM (the
checkpoint is saved, the test report skipped).
"""

from __future__ import annotations

import argparse
import dataclasses
import json
import sys
import typing
from pathlib import Path
from typing import Any

from scratchformer.cli.common import key_table, parse_bool, parse_train_settings, sample_lines, shown
from scratchformer.config import RECIPES, ModelConfig, TrainConfig
from scratchformer.config.train import FIELD_HELP, TRAIN_FLAGS
from scratchformer.i18n import N_, _

_HINTS = typing.get_type_hints(TrainConfig)
_TRAIN_KEYS = {f.name for f in dataclasses.fields(TrainConfig)}
_NONE = object()  # `--flag none` for an optional field: an explicit None, told apart from a flag not given


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


def field_help(f: dataclasses.Field) -> str:
    """The field's help with its one default: the demo recipe's value where it sets one (what `train` with no
    --recipe / --config uses), and the built-in one used with --config."""
    base = f.default if f.default is not dataclasses.MISSING else f.default_factory()  # type: ignore[misc]
    recipe = RECIPES["demo"]
    if f.name in recipe and recipe[f.name] != base:
        default = _("default: {recipe} from the demo recipe; {base} with --config and no --recipe").format(
            recipe=shown(recipe[f.name]), base=shown(base))
    else:
        default = _("default: {value}").format(value=shown(base))
    text = _(FIELD_HELP[f.name]) if f.name in FIELD_HELP else ""
    return _("{text} ({default})").format(text=text, default=default) if text else _("({default})").format(
        default=default)


def _keys_help() -> str:
    """What `train --help` says below the flags: every KEY=VALUE key, TrainConfig's with its meaning and default, the
    model's by name (their meaning: docs/shapes.md, `scratchformer params`)."""
    import textwrap

    keys = [f for f in dataclasses.fields(TrainConfig) if f.name not in TRAIN_FLAGS and f.name != "model"]
    lines = [_("KEY=VALUE training settings (any TrainConfig field; also in a --config file):"),
             *key_table([(f.name, field_help(f)) for f in keys])]
    model = [f.name for f in dataclasses.fields(ModelConfig) if f.name not in {*_TRAIN_KEYS, "extra"}]
    lines += ["", *textwrap.wrap(_("KEY=VALUE model settings, over the preset's (e.g. d_model=128 norm_placement=pre): "
                                   "{keys}").format(keys=", ".join(model)), 100)]
    return "\n".join(lines) + "\n"


def _retired() -> dict[str, str]:
    """Each flag that became a KEY=VALUE key, and what to write instead ({value}: the value given with it)."""
    retired = {f"--{f.name.replace('_', '-')}": f"{f.name}={{value}}" for f in dataclasses.fields(TrainConfig)
               if f.name not in TRAIN_FLAGS and f.name != "model"}
    retired["--max-len"] = "max_sentence_len={value}"
    retired["--test-report"] = "--no-test (the report runs unless it is given)"
    return retired


def _flags(args: argparse.Namespace) -> dict:
    """The TrainConfig fields given as train's own flags (`none`: an explicit None); KEY=VALUE: parse_train_settings."""
    flags = {}
    for name in TRAIN_FLAGS:
        value = getattr(args, name, None)
        if value is not None:
            flags[name] = None if value is _NONE else value
    return flags


def cmd_train(args: argparse.Namespace) -> int:
    from scratchformer.training.launch import default_recipe, given_settings, launch  # late: torch (--help is quick)

    recipe = default_recipe(args.recipe, args.config, args.resume, args.task)
    settings, model = parse_train_settings(args.overrides or [])
    given = given_settings(recipe, args.config, {**settings, **_flags(args)}, model)
    out = Path(args.out or f"runs/{recipe or given.get('task', 'translate')}")
    cfg, summary = launch(given, out, resume=args.resume, overwrite=args.overwrite, quiet=args.quiet)
    # SIGINT / SIGTERM: the checkpoint is saved; no test report, and the shell's status for that signal
    status = 128 + summary["signal"] if summary.get("interrupted") and summary.get("signal") else 0
    if summary.pop("is_main", True):
        summary = {"run_dir": str(out), **summary}
        print(json.dumps(summary, ensure_ascii=False) if args.json else readable_summary(summary))
        if cfg.task == "translate" and cfg.test_report and not status:
            from scratchformer.evaluation.translation import evaluate_run

            if not args.quiet:
                print(_("test report: the test split, decoded as decoding.json says (as `evaluate` does) ..."),
                      file=sys.stderr, flush=True)
            test = evaluate_run(out, split="test", limit=None, show=5)
            print(json.dumps(test, ensure_ascii=False) if args.json else readable_test(test))
    return status


def _figure(value: Any) -> str:
    return f"{value:.4g}" if isinstance(value, float) else str(value)


def readable_summary(summary: dict[str, Any]) -> str:
    """The end of training for a person: where the run is, how far it got, its last validation, where its data
    came from; `--json` prints the same dict as one JSON line."""
    s = summary
    stop = _(" (interrupted by signal {signal})").format(signal=s["signal"]) if s.get("interrupted") else ""
    lines = [_("trained {run}: {step} updates, epoch {epoch}, {minutes} min{stop}").format(
        run=s["run_dir"], step=s["step"], epoch=s.get("epoch", 0), minutes=f"{s.get('elapsed_s', 0) / 60:.1f}",
        stop=stop)]
    names = {"valid_loss": N_("loss"), "valid_nll": N_("nll"), "valid_ppl": N_("ppl")}
    valid = [f"{_(names[k])} {_figure(s[k])}" for k in ("valid_loss", "valid_nll", "valid_ppl") if k in s]
    if "bleu" in s:
        valid.append(_("greedy BLEU {bleu} on its first sentences (bleu_samples)").format(bleu=s["bleu"]))
    if valid:
        lines.append(_("  valid (step {step}): {scores}").format(step=s.get("step"), scores=_(", ").join(valid)))
    data = s.get("data") or {}
    if data:
        splits = {"train": N_("train"), "valid": N_("valid"), "test": N_("test")}
        counts = _(", ").join(f"{data[k]} {_(splits[k])}" for k in splits if k in data)
        from scratchformer.training.tasks.base import splits_shown

        lines.append(_("  data: {corpus}: {splits}").format(corpus=data.get("corpus"),
                                                          splits=splits_shown(str(data.get("splits"))))
                     + (f" ({counts})" if counts else ""))
    listed = {"run_dir", "step", "epoch", "elapsed_s", "interrupted", "signal", "data", "kind", "valid_loss",
             "valid_nll", "valid_ppl", "bleu"}
    rest = [f"{k} {_figure(v)}" for k, v in s.items() if k not in listed and not isinstance(v, (dict, list))]
    if rest:
        lines.append(f"  {', '.join(rest)}")
    return "\n".join(lines)


def readable_test(result: dict[str, Any]) -> str:
    """The test report for a person: the scores with their decoding, then a few samples."""
    lines = [_("test ({corpus}, {sentences} sentences, beam {beam}): BLEU {bleu}, chrF {chrf}").format(
        corpus=result.get("corpus"), sentences=result.get("sentences", "?"), beam=result.get("beam", "?"),
        bleu=result.get("bleu"),
        chrf=result.get("chrf"))]
    if result.get("bleu_signature"):
        lines.append(f"  sacreBLEU {result['bleu_signature']}")
    for sample in result.get("samples", []):
        lines.append(sample_lines(sample))
    return "\n".join(lines)


def register(sub: argparse._SubParsersAction) -> None:
    p = sub.add_parser("train", help="train a model (translation by default) into a run directory",
                       epilog=_keys_help(), formatter_class=argparse.RawDescriptionHelpFormatter)
    p.add_argument("--recipe", choices=sorted(RECIPES), default=None,
                   help="named settings (default when no --config is given: demo, or lm-demo / mlm-demo / "
                        "classify-demo for --task lm / mlm / classify)")
    p.add_argument("--config", help="JSON file of training options (TrainConfig fields)")
    p.add_argument("--out", help="run directory (default runs/<recipe>)")
    p.add_argument("--resume", action="store_true", help="continue the run in --out from its last checkpoint")
    p.add_argument("--overwrite", action="store_true",
                   help="delete an existing run in --out first (only the files training wrote)")
    p.add_argument("--quiet", action="store_true", help="no progress bar")
    p.add_argument("--json", action="store_true", help="print the end-of-training summary as one JSON line")
    p.add_argument("--no-test", dest="test_report", action="store_const", const=False,
                   help="skip the test-split report (kept by --resume)")
    p.set_defaults(retired_flags=_retired())
    for f in dataclasses.fields(TrainConfig):
        if f.name in TRAIN_FLAGS and f.name != "test_report":
            p.add_argument(f"--{f.name.replace('_', '-')}", dest=f.name, type=_flag_type(_HINTS[f.name]),
                           default=None, help=field_help(f))
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="a training or model setting (listed below), e.g. warmup=4000 d_model=128")
    p.set_defaults(func=cmd_train)

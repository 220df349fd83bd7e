"""From what a command line asks for to a finished run: the settings' precedence, the run directory's
preparation (lock, --overwrite, --resume) and the call of the trainer. `scratchformer train` only parses flags.

Precedence: built-in defaults < --recipe < --config FILE < explicit flags and KEY=VALUE settings. With
nothing given it is the `demo` recipe (or lm-demo / mlm-demo / classify-demo for --task lm / mlm / classify).
--resume applies the flags that may change (SAFE_ON_RESUME, each change said on stderr) and refuses the others.
"""

from __future__ import annotations

import contextlib
import os
import sys
from pathlib import Path
from typing import Any

from scratchformer import runs
from scratchformer.config import RECIPES, TrainConfig, read_json
from scratchformer.config.train import as_given, upgrade_train_fields, upsample_factors
from scratchformer.data.corpus import absolute_corpus, check_corpus, check_upsample
from scratchformer.decoding.compile_home import private_inductor
from scratchformer.errors import N_, ConfigError
from scratchformer.i18n import say
from scratchformer.runs.names import TRAIN_CONFIG

DEFAULT_PRESETS = {"lm": "gpt-tiny", "mlm": "bert-tiny", "classify": "bert-tiny"}  # when no preset is given
DEFAULT_RECIPES = {"lm": "lm-demo", "mlm": "mlm-demo", "classify": "classify-demo"}  # else "demo"
# What --resume may change: how long and how the run goes on, not what is trained. Anything else given with
# --resume must equal the saved train_config.json (it would make a different run).
SAFE_ON_RESUME = ("max_steps", "time_limit", "max_epochs", "accum_steps", "eval_every", "save_every", "log_every",
                  "keep_last", "patience", "bleu_samples", "device", "dtype", "clip_norm", "lr_factor", "compile",
                  "fsdp", "on_error", "test_report")


def default_recipe(recipe: str | None, config_file: str | None, resume: bool, task: str | None) -> str | None:
    """The recipe when none is named: `demo` (or the task's demo), unless --config or --resume says more."""
    if recipe is None and config_file is None and not resume:
        return DEFAULT_RECIPES.get(task or "translate", "demo")
    return recipe


def read_config_file(path: str) -> dict:
    """The options of `--config FILE`: a JSON object, or a one-line ConfigError (config.read_json's checks: missing,
    not a regular file such as a FIFO, not UTF-8, not JSON, not an object)."""
    if Path(path).is_dir():
        raise ConfigError(N_("--config {path} is a directory: give a JSON file of training options"), path=path)
    return upgrade_train_fields(read_json(path, "--config"))  # an older file's max_len is max_sentence_len


def given_settings(recipe: str | None, config_file: str | None, flags: dict[str, Any],
                   model: dict[str, Any]) -> dict[str, Any]:
    """What a command line asks for: --recipe < --config FILE < explicit flags (and KEY=VALUE model overrides)."""
    settings: dict[str, Any] = {}
    if recipe:
        settings.update(RECIPES[recipe])
    if config_file:
        settings.update(read_config_file(config_file))
    settings.update(flags)
    if model:
        settings["model"] = {**settings.get("model", {}), **model}
    return settings


def resumed_config(out: Path, given: dict, is_main: bool) -> TrainConfig:
    """train_config.json of the run, with the flags that are safe to change applied (and said), or a one-line
    ConfigError for a flag that would make a different run."""
    saved = TrainConfig.load(out / TRAIN_CONFIG).to_dict()
    changed = []
    for key, value in given.items():
        old = saved.get(key)
        if key == "model":
            diff = sorted(k for k, v in value.items() if k not in old or old[k] != v)
            if diff:
                k = diff[0]
                raise ConfigError(N_("--resume {out}: model override {k}={value!r} differs from the run's {get!r}: "
                                     "it would make a different run; drop it, or train a new run into another --out"),
                                  out=out, k=k, value=value[k], get=old.get(k, '(preset default)'))
            continue
        if value == old and type(value) is type(old):
            continue
        if key == "corpus" and isinstance(old, str) and absolute_corpus(old) == value:
            continue  # a run that recorded its corpus relative (before paths were made absolute)
        if key not in SAFE_ON_RESUME:
            raise ConfigError(N_("--resume {out}: {given} differs from the run's {old!r}: it would make a different "
                                 "run; drop it, or train a new run into another --out"), out=out,
                              given=as_given(key, repr(value)), old=old)
        changed.append(f"{key} {old!r} -> {value!r}")
        saved[key] = value
    if changed and is_main:
        print(say(N_("resume: {changes}"), changes="; ".join(changed)), file=sys.stderr)
    return TrainConfig.from_dict(saved)


def is_main_rank() -> bool:
    return os.environ.get("RANK", "0") == "0"


def refuse_init_into_itself(init: str | None, out: Path, overwrite: bool = False) -> None:
    """`train --init X --out X`: fine-tuning a run into itself would replace the weights it starts from (and with
    --overwrite, an --init inside --out, such as one of its checkpoints, would be deleted before it is read)."""
    if init is None:
        return
    start, target = Path(init).resolve(), Path(out).resolve()
    if start == target or (overwrite and target in start.parents):
        raise ConfigError(N_("init={init} --out {out}: a run cannot be fine-tuned into itself (its weights and "
                             "config would be replaced while they are read); give another --out"), init=init, out=out)


def launch(given: dict[str, Any], out: Path, resume: bool = False, overwrite: bool = False,
           quiet: bool = False) -> tuple[TrainConfig, dict[str, Any]]:
    """Train what `given` asks for into `out`: (the TrainConfig used, the trainer's summary).

    Safety: `out` is locked while training (RUN_DIR/.lock names the holder's pid); --overwrite deletes only what
    training wrote, and only in a folder marked as a run; bad values fail before anything is written."""
    from scratchformer.training.trainer import train

    if isinstance(given.get("corpus"), str):  # recorded absolute: `evaluate RUN` then works from any folder
        given = {**given, "corpus": absolute_corpus(given["corpus"])}
    settings = dict(given)
    if "preset" not in settings and settings.get("task", "translate") in DEFAULT_PRESETS:
        settings["preset"] = DEFAULT_PRESETS[settings["task"]]
    cfg = TrainConfig.from_dict(settings)  # bad values fail here, before anything is written
    if not resume or "corpus" in given:
        check_corpus(cfg.corpus)  # an unknown corpus too: a retry then needs no --overwrite
        if cfg.upsample:
            check_upsample(cfg.corpus, upsample_factors(cfg.upsample))
    refuse_init_into_itself(cfg.init, out, overwrite)
    if cfg.compile:  # before anything is written: a cache folder someone else can write is one line
        private_inductor()
    is_main = is_main_rank()  # under torchrun only rank 0 checks, locks, deletes and reports
    # a run, or a new or empty folder: never a user's folder, nor --resume of nothing, except under
    # `torchrun --max-restarts N`, whose one command must start the run and resume it after a restart
    restartable = os.environ.get("TORCHELASTIC_MAX_RESTARTS", "0").strip() not in ("", "0")
    runs.prepare_run_dir(out, runs.TRAIN, overwrite=overwrite, resume=runs.prepare.IF_ANY if resume and restartable
                         else resume, main=is_main)
    with runs.run_lock(out) if is_main else contextlib.nullcontext():
        if resume and (out / TRAIN_CONFIG).exists():
            cfg = resumed_config(out, given, is_main)
        if cfg.compile:  # torch.compile's code is built and loaded in this user's checked cache, never in /tmp
            private_inductor()
        return cfg, train(cfg, out, resume=resume, quiet=quiet)

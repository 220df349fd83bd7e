"""Argument helpers shared by commands: presets with KEY=VALUE overrides."""

from __future__ import annotations

import argparse
import dataclasses
import json
import typing
from typing import Any

from scratchformer.config import PRESETS, ModelConfig
from scratchformer.errors import ConfigError

_TYPES = typing.get_type_hints(ModelConfig)


_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_bool(text: str) -> bool:
    """'true'/'1'/'yes'/'on' -> True, 'false'/'0'/'no'/'off' -> False; anything else is a ValueError."""
    if text.lower() not in _TRUE + _FALSE:
        raise ValueError(f"{text!r} is not a boolean (use true or false)")
    return text.lower() in _TRUE


def set_threads(threads: int | None) -> None:
    """`--threads N` of the commands that run a model: torch's CPU threads (None: torch's choice)."""
    if threads is None:
        return
    if threads < 1:
        raise ConfigError(f"--threads {threads}: give a number of CPU threads >= 1")
    import torch

    torch.set_num_threads(threads)


def parse_value(key: str, text: str) -> Any:
    """'d_model=256' -> 256, 'norm=pre' -> 'pre', 'd_k=none' -> None, using the field's declared type."""
    if key not in _TYPES:
        fields = ", ".join(f.name for f in dataclasses.fields(ModelConfig))
        raise ConfigError(f"unknown config field {key!r}; fields: {fields}")
    hint = _TYPES[key]
    args = typing.get_args(hint)
    if text.lower() in ("none", "null") and type(None) in args:
        return None
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    try:
        if base is bool:
            return parse_bool(text)
        if base in (int, float, str):
            return base(text)
        return json.loads(text)
    except ValueError:
        raise ConfigError(f"cannot read {key}={text!r} as {getattr(base, '__name__', base)}") from None


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError(f"override {item!r} is not KEY=VALUE (for example d_model=256 or norm=pre)")
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        out[key] = parse_value(key, value.strip())
    return out


def add_model_args(p: argparse.ArgumentParser, default_preset: str = "paper-base") -> None:
    p.add_argument("--preset", default=default_preset, help=f"one of: {', '.join(PRESETS)}")
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE", help="config overrides, e.g. d_model=256 norm=pre")


def config_from_args(args: argparse.Namespace) -> ModelConfig:
    return ModelConfig.preset(args.preset, **parse_overrides(args.overrides))

"""DecodingConfig: how a model likes to be decoded, chosen on its validation data and kept beside it as
RUN_DIR/decoding.json (like Hugging Face's generation_config.json). translate, evaluate, serve and
scripts/eval_software.py start from it; a flag given on the command line wins.

    {"alpha": 1.5, "split_sentences": true, "repair_copies": true, "chosen": "mean valid BLEU ..."}

    alpha            the GNMT length penalty's exponent (beam search; default 0.6, the paper's)
    split_sentences  translate each text sentence by sentence and join the parts (decoding/sentences.py)
    repair_copies    put back names, numbers and paths the model miscopied (decoding/copies.py)
    chosen           free text: how these values were chosen (read by people only)
    ensemble         weights files of more members, beside model.safetensors in the run folder; our own decoder
                     averages their next-token probabilities with the model's (decoding/ensemble.py)

A run without the file decodes with these defaults. The file is JSON only; an unknown key, a value of the wrong
type or out of range is a one-line ConfigError naming the file.
"""

from __future__ import annotations

import re
from dataclasses import asdict, dataclass, field, replace
from pathlib import Path
from typing import Any

from scratchformer.config.fields import read_json, reject_unknown_fields
from scratchformer.errors import ConfigError

MEMBER_FILE = re.compile(r"[\w.-]+\.safetensors")  # a file name in the run folder, no path
MAX_ALPHA = 10.0  # GNMT tuned alpha in [0.6, 1]; ((5 + 512) / 6) ** 10 is still a float


def check_alpha(alpha: float, named: str) -> None:
    """A one-line ConfigError unless 0 <= alpha <= MAX_ALPHA (NaN fails too; a huge alpha overflows
    ((5 + |Y|) / 6) ** alpha); `named` is how the message names it (`--alpha -1`, `alpha=-1`)."""
    if not 0 <= alpha <= MAX_ALPHA:
        raise ConfigError(f"{named}: the length penalty's exponent must be in [0, {MAX_ALPHA}] "
                          "(0 = off; the paper uses 0.6)")


def check_members(names: list) -> None:
    """A one-line ConfigError unless `names` are distinct safetensors file names (no folders: members live in the
    run folder, so a decoding.json cannot point outside it) other than model.safetensors."""
    for name in names:
        if not isinstance(name, str) or not MEMBER_FILE.fullmatch(name) or name == "model.safetensors":
            raise ConfigError(f"ensemble member {name!r}: give the name of a .safetensors file in the run folder, "
                              "without a folder, other than model.safetensors (the first member)")
    if len(set(names)) < len(names):
        raise ConfigError(f"ensemble {names}: a member is named twice")


@dataclass(frozen=True)
class DecodingConfig:
    """The decoding options a run may set for itself; `pick` lays flags over them."""

    alpha: float = 0.6
    split_sentences: bool = False
    repair_copies: bool = False
    chosen: str = ""
    ensemble: list[str] = field(default_factory=list)

    def pick(self, **flags: Any) -> DecodingConfig:
        """These options with each flag that was given (not None) in place of the run's value."""
        return replace(self, **{k: v for k, v in flags.items() if v is not None})

    def text_level(self) -> list[str]:
        """The text-level options turned on, by name: what runs around any engine's search (translate_with)."""
        return [name for name in ("split_sentences", "repair_copies") if getattr(self, name)]

    def options(self) -> dict[str, Any]:
        """The search and text-level options as keyword arguments (without `chosen`, and without `ensemble`, which
        load_run reads: run.members)."""
        return {k: v for k, v in asdict(self).items() if k not in ("chosen", "ensemble")}

    @classmethod
    def load(cls, path: str | Path) -> DecodingConfig:
        """decoding.json checked; a one-line ConfigError naming the file for anything wrong in it."""
        data = read_json(path, "decoding config")
        try:
            reject_unknown_fields(cls, data, "decoding config field(s)")
            alpha = float(data.get("alpha", cls.alpha))
            check_alpha(alpha, f"alpha={alpha}")  # flags are checked where they are used
            check_members(data.get("ensemble", []))
            return cls(**{**data, "alpha": alpha})
        except ConfigError as e:
            raise ConfigError(f"decoding config {path}: {e}") from None

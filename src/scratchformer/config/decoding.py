"""DecodingConfig: how a model likes to be decoded, chosen on its validation data and kept beside it as
RUN_DIR/decoding.json (like Hugging Face's generation_config.json). translate, evaluate, serve and
scripts/eval_software.py start from it; a flag given on the command line wins.

    {"alpha": 1.5, "split_sentences": true, "repair_copies": true, "chosen": "mean valid BLEU ..."}

    alpha            the GNMT length penalty's exponent (beam search; default 0.6, the paper's)
    split_sentences  translate each text sentence by sentence and join the parts (decoding/sentences.py)
    repair_copies    put back names, numbers and paths the model miscopied (decoding/copies.py)
    chosen           free text: how these values were chosen (read by people only)

A run without the file decodes with these defaults. The file is JSON only; an unknown key, a value of the wrong
type or out of range is a one-line ConfigError naming the file.
"""

from __future__ import annotations

from dataclasses import asdict, dataclass, replace
from pathlib import Path
from typing import Any

from scratchformer.config.fields import read_json, reject_unknown_fields
from scratchformer.errors import ConfigError

MAX_ALPHA = 10.0  # GNMT tuned alpha in [0.6, 1]; ((5 + 512) / 6) ** 10 is still a float


def check_alpha(alpha: float, named: str) -> None:
    """A one-line ConfigError unless 0 <= alpha <= MAX_ALPHA (NaN fails too; a huge alpha overflows
    ((5 + |Y|) / 6) ** alpha); `named` is how the message names it (`--alpha -1`, `alpha=-1`)."""
    if not 0 <= alpha <= MAX_ALPHA:
        raise ConfigError(f"{named}: the length penalty's exponent must be in [0, {MAX_ALPHA}] "
                          "(0 = off; the paper uses 0.6)")


@dataclass(frozen=True)
class DecodingConfig:
    """The decoding options a run may set for itself; `pick` lays flags over them."""

    alpha: float = 0.6
    split_sentences: bool = False
    repair_copies: bool = False
    chosen: str = ""

    def pick(self, **flags: Any) -> DecodingConfig:
        """These options with each flag that was given (not None) in place of the run's value."""
        return replace(self, **{k: v for k, v in flags.items() if v is not None})

    def text_level(self) -> list[str]:
        """The text-level options turned on, by name: what runs around any engine's search (translate_with)."""
        return [name for name in ("split_sentences", "repair_copies") if getattr(self, name)]

    def options(self) -> dict[str, Any]:
        """The decoding options as keyword arguments (without `chosen`)."""
        return {k: v for k, v in asdict(self).items() if k != "chosen"}

    @classmethod
    def load(cls, path: str | Path) -> DecodingConfig:
        """decoding.json checked; a one-line ConfigError naming the file for anything wrong in it."""
        data = read_json(path, "decoding config")
        try:
            reject_unknown_fields(cls, data, "decoding config field(s)")
            alpha = float(data.get("alpha", cls.alpha))
            check_alpha(alpha, f"alpha={alpha}")  # flags are checked where they are used
            return cls(**{**data, "alpha": alpha})
        except ConfigError as e:
            raise ConfigError(f"decoding config {path}: {e}") from None

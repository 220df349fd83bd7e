"""RUN_DIR/decoding.json: how a model likes to be decoded, chosen on its validation data (like Hugging Face's
generation_config.json). translate, evaluate, serve and scripts/eval_software.py start from it; a flag given on
the command line wins.

    {"alpha": 1.5, "split_sentences": true, "repair_copies": true,
     "chosen": "mean valid BLEU of the 7 software sources: 30.7 (defaults) -> 34.1"}

    alpha            the GNMT length penalty's exponent (beam search; default 0.6, the paper's)
    split_sentences  translate each text sentence by sentence and join the parts (decoding/sentences.py)
    repair_copies    put back names, numbers and paths the model miscopied (decoding/copies.py)
    chosen           free text: how these values were chosen (shown by nothing, kept for people)

A run without the file decodes with the defaults above. The file is JSON only, read with json.loads; an unknown
key, a value of the wrong type or out of range is a one-line CheckpointError naming the file.
"""

from __future__ import annotations

import json
import math
from dataclasses import asdict, dataclass, fields, replace
from pathlib import Path
from typing import Any

from scratchformer.decoding.translate import MAX_ALPHA
from scratchformer.errors import CheckpointError

DECODING_FILE = "decoding.json"


@dataclass(frozen=True)
class Decoding:
    """The decoding options a run may set for itself; `pick` lays flags over them."""

    alpha: float = 0.6
    split_sentences: bool = False
    repair_copies: bool = False
    chosen: str = ""

    def pick(self, **flags: Any) -> Decoding:
        """These options with each flag that was given (not None) in place of the run's value."""
        return replace(self, **{k: v for k, v in flags.items() if v is not None})

    def options(self) -> dict[str, Any]:
        """The decoding options as keyword arguments (without `chosen`)."""
        return {k: v for k, v in asdict(self).items() if k != "chosen"}


def load_decoding(run_dir: str | Path) -> Decoding:
    """RUN_DIR/decoding.json checked, or the defaults when there is none."""
    path = Path(run_dir) / DECODING_FILE
    if not path.exists():
        return Decoding()
    try:
        data = json.loads(path.read_text(encoding="utf-8"))
    except (OSError, UnicodeDecodeError, ValueError) as e:
        raise CheckpointError(f"{path}: not a JSON file ({e}); fix it or delete it to decode with the "
                              "defaults") from None
    if not isinstance(data, dict):
        raise CheckpointError(f"{path}: give a JSON object like {{\"alpha\": 1.0}}, got {type(data).__name__}")
    kinds = {f.name: f.type for f in fields(Decoding)}
    unknown = sorted(set(data) - set(kinds))
    if unknown:
        raise CheckpointError(f"{path}: unknown key(s) {', '.join(unknown)}; a decoding file holds "
                              f"{', '.join(kinds)}")
    for key, value in data.items():
        want = {"float": (int, float), "bool": (bool,), "str": (str,)}[kinds[key]]
        if not isinstance(value, want) or (kinds[key] == "float" and isinstance(value, bool)):
            raise CheckpointError(f"{path}: {key} must be a {kinds[key]}, got {value!r}")
    alpha = data.get("alpha", Decoding.alpha)
    if not (math.isfinite(alpha) and 0 <= alpha <= MAX_ALPHA):
        raise CheckpointError(f"{path}: alpha {alpha} must be in [0, {MAX_ALPHA}] (0 = off; the paper uses 0.6)")
    return Decoding(**{**data, "alpha": float(alpha)})


def write_decoding(run_dir: str | Path, decoding: Decoding) -> Path:
    """Write `decoding` as RUN_DIR/decoding.json (atomically); returns the path."""
    from scratchformer.runs.files import write_json

    path = Path(run_dir) / DECODING_FILE
    write_json(path, asdict(decoding))
    return path

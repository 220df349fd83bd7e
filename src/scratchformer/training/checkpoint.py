"""Training checkpoints: what a trainer state holds, how it is written without pickle, and averaging.

    checkpoints/step-N/  model.safetensors + trainer_state.json (step, epoch, data position, scheduler, the
                         optimiser's param groups; tensors referenced by key) + trainer_state.safetensors (every
                         tensor: optimiser moments, RNG states). Written as a whole (temp dir + rename).

Loading never unpickles: a legacy trainer_state.pt is read with torch.load(weights_only=True) and refused
if it holds anything but plain tensors and containers. Where the files live is runs/layout.py's business.
"""

from __future__ import annotations

import json
import math
import re
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file

from scratchformer.config.fields import loads_json
from scratchformer.errors import N_, CheckpointError, CheckpointWriteError, TrainingDiverged, UnsafeCheckpointError
from scratchformer.runs import files
from scratchformer.runs.folders import check_file
from scratchformer.runs.layout import (
    LEGACY_STATE,
    TRAINER_JSON,
    TRAINER_TENSORS,
    checkpoint_dir,
    latest_checkpoint,
    list_checkpoints,
    writing_checkpoint,
)
from scratchformer.runs.names import AVERAGED, WEIGHTS, step_name
from scratchformer.runs.weights import read_tensors, save_state, state_dict_for_saving


def flatten_state(obj: Any, prefix: str = "") -> tuple[Any, dict[str, torch.Tensor]]:
    """A nested dict/list/tuple of tensors and JSON scalars -> (a JSON skeleton, {key: tensor}).

    In the skeleton a tensor is {"__tensor__": key}, a tuple {"__tuple__": [...]}, a dict whose keys are not
    all strings (the optimiser's parameter ids) {"__items__": [[key, value], ...]} and a non-finite float
    {"__float__": "inf"}: strict JSON, and `unflatten_state` gives back the same Python objects."""
    tensors: dict[str, torch.Tensor] = {}

    def sub(key: str, k: Any) -> str:  # "optimizer/state/0/exp_avg"
        return f"{key}/{k}" if key else str(k)

    def walk(x: Any, key: str) -> Any:
        if isinstance(x, torch.Tensor):
            tensors[key] = x.detach().cpu().contiguous().clone()  # clone: no storage shared between entries
            return {"__tensor__": key}
        if isinstance(x, dict):
            if all(isinstance(k, str) for k in x):
                return {k: walk(v, sub(key, k)) for k, v in x.items()}
            if not all(isinstance(k, (str, int)) and not isinstance(k, bool) for k in x):
                raise TypeError(f"trainer state {key or '/'}: dict keys {list(x)[:3]} are not str or int")
            return {"__items__": [[k, walk(v, sub(key, k))] for k, v in x.items()]}
        if isinstance(x, (list, tuple)):
            items = [walk(v, sub(key, i)) for i, v in enumerate(x)]
            return {"__tuple__": items} if isinstance(x, tuple) else items
        if isinstance(x, float) and not math.isfinite(x):
            return {"__float__": repr(x)}
        if x is None or isinstance(x, (bool, int, float, str)):
            return x
        raise TypeError(f"trainer state {key or '/'}: cannot store a {type(x).__name__} without pickle")

    return walk(obj, prefix), tensors


def unflatten_state(skeleton: Any, tensors: dict[str, torch.Tensor], where: Path | str = "trainer state") -> Any:
    """The inverse of `flatten_state`; a CheckpointError naming `where` for a reference to a missing tensor."""

    def walk(x: Any) -> Any:
        if isinstance(x, list):
            return [walk(v) for v in x]
        if not isinstance(x, dict):
            return x
        if len(x) == 1:
            (tag, value), = x.items()
            if tag == "__tensor__":
                if value not in tensors:
                    raise CheckpointError(N_("{where}: tensor {value!r} is missing: the checkpoint is incomplete"),
                                          where=where, value=value)
                return tensors[value]
            if tag == "__tuple__":
                return tuple(walk(v) for v in value)
            if tag == "__items__":
                return {k: walk(v) for k, v in value}
            if tag == "__float__":
                return float(value)
        return {k: walk(v) for k, v in x.items()}

    return walk(skeleton)


def write_trainer_state(folder: Path, state: dict[str, Any]) -> None:
    """trainer_state.json + trainer_state.safetensors in `folder` (a temporary checkpoint folder)."""
    skeleton, tensors = flatten_state(state)
    files.save_tensors(tensors, Path(folder) / TRAINER_TENSORS)
    files.write_json(Path(folder) / TRAINER_JSON, skeleton, allow_nan=False)


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    """The trainer state of checkpoints/step-N (JSON + safetensors; a legacy .pt only if it is plain tensors)."""
    ckpt = Path(ckpt)
    if not (ckpt / TRAINER_JSON).exists() and (ckpt / LEGACY_STATE).exists():
        return _load_legacy_state(ckpt / LEGACY_STATE)
    path = ckpt / TRAINER_JSON
    try:
        skeleton = loads_json(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(N_("{path} is missing: the checkpoint is incomplete"), path=path) from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(N_("{path} is not valid JSON (a truncated or damaged file): {e}"), path=path,
                              e=e) from None
    try:
        tensors = load_file(str(ckpt / TRAINER_TENSORS))
    except Exception as e:  # missing, truncated or foreign
        raise CheckpointError(N_("{value} is not a readable safetensors file: {e}"), value=ckpt / TRAINER_TENSORS,
                              e=e) from None
    state = unflatten_state(skeleton, tensors, path)
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(N_("{path} is not a scratchformer trainer state (no step)"), path=path)
    return state


def counters(state: dict[str, Any], rank: int = 0) -> dict[str, Any]:
    """The loop's counters of a trainer state (and this rank's RNG restored): step, epoch, cursor in the epoch's
    batches, best validation loss and its step, seconds trained. A KeyError/TypeError if the state lacks them."""
    out = {"step": state["step"], "epoch": state["epoch"], "cursor": state["cursor"],
           "best_valid": state["best_valid"], "elapsed": state["elapsed"],
           "best_step": int(state.get("best_step", state["step"]))}  # older states lack it: count patience from here
    rng = state["rng_cpu"][rank] if isinstance(state["rng_cpu"], list) else state["rng_cpu"]
    torch.set_rng_state(rng)
    if torch.cuda.is_available() and state.get("rng_cuda") is not None:
        torch.cuda.set_rng_state(state["rng_cuda"])
    return out


def diverged(error: TrainingDiverged, last: Path | None) -> TrainingDiverged:
    """The one-line error (and log line) of a loss that became nan or inf, naming the last checkpoint kept."""
    if last is None:
        return TrainingDiverged(error.step, error.loss, N_(
            "loss became {loss} at step {step}: no checkpoint was saved (nothing was saved after it); lower "
            "lr_factor= or set clip_norm=, then --resume (or --overwrite)"))
    return TrainingDiverged(error.step, error.loss, N_(
        "loss became {loss} at step {step}: the last finite checkpoint is step {last} (nothing was saved after it); "
        "lower lr_factor= or set clip_norm=, then --resume (or --overwrite)"), last=int(last.name.split("-")[1]))


def unfit(found: Path, e: Exception) -> CheckpointError:
    """The one-line error for a trainer state that does not fit the run being resumed."""
    if isinstance(e, CheckpointError):
        return e
    first = str(e).splitlines()[0] if str(e) else ""
    return CheckpointError(N_("{found}: the trainer state does not fit this run ({kind}: {first})"), found=found,
                           kind=type(e).__name__, first=first)


def _load_legacy_state(path: Path) -> dict[str, Any]:
    """A trainer_state.pt of older versions, through torch's weights-only unpickler (no code can run)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
        why = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        detail = f"it references {why.group(1)}" if why else (text.splitlines()[0][:200] if text else type(e).__name__)
        raise UnsafeCheckpointError(N_("refusing to unpickle {path}: not a plain tensor file ({detail}); delete "
                                       "that checkpoint folder if you did not write it"), path=path,
                                    detail=detail) from None
    if not isinstance(state, dict):
        raise CheckpointError(N_("{path} is not a scratchformer trainer state"), path=path)
    return state


def save_checkpoint(run_dir: Path, step: int, model: torch.nn.Module, trainer_state: dict[str, Any],
                    keep_last: int = 5) -> Path:
    """Write checkpoints/step-N/ as a whole (temp dir + rename), point `latest` at it, prune old ones.

    A failed write (a full disk) raises a one-line CheckpointError; the previous checkpoints stay intact."""
    try:
        with writing_checkpoint(run_dir, step, keep_last) as tmp:  # runs/layout.py: the one checkpoint writer
            files.save_tensors(state_dict_for_saving(model), tmp / WEIGHTS)
            write_trainer_state(tmp, trainer_state)
        return checkpoint_dir(run_dir) / step_name(step)
    except OSError as e:
        previous = latest_checkpoint(run_dir)
        kept = f"the previous checkpoint {previous.name} is intact" if previous else "no earlier checkpoint"
        raise CheckpointWriteError(N_("cannot write checkpoint {value}: {value2} ({kept}); free space or fix the "
                                      "folder's permissions, then --resume"),
                                   value=checkpoint_dir(run_dir) / step_name(step), value2=e.strerror or e,
                                   kept=kept) from None


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the weights of several checkpoints (the paper averages the last 5)."""
    if not paths:
        raise CheckpointError(N_("no checkpoints to average"))
    total: dict[str, torch.Tensor] = {}
    first = Path(paths[0]) / WEIGHTS
    shapes: dict[str, tuple[int, ...]] = {}
    for p in paths:
        path = Path(p) / WEIGHTS
        tensors = read_tensors(path)
        here = {name: tuple(t.shape) for name, t in tensors.items()}
        if not shapes:
            shapes = here
        elif here != shapes:
            diff = sorted(set(here) ^ set(shapes)) or sorted(n for n in here if here[n] != shapes[n])
            raise CheckpointError(N_("cannot average {first} and {path}: they come from different configs (tensor "
                                     "{diff} differs)"), first=first, path=path, diff=diff[0])
        for name, t in tensors.items():
            total[name] = total.get(name, 0) + t.double()
    return {name: (t / len(paths)).float() for name, t in total.items()}


def average_last(run_dir: Path, last: int = 5, out: Path | None = None,
                 overwrite: bool = False) -> tuple[list[Path], Path]:
    """Average the weights of the last `last` checkpoints of a run into `out` (default RUN_DIR/averaged.safetensors);
    returns the checkpoints averaged and the file written. `out` is checked first (runs/folders.py): never one of
    a run's own files, and an existing file only with `overwrite`."""
    if last < 1:
        raise CheckpointError(N_("--last {last}: give the number of checkpoints to average (2 or more)"), last=last)
    default = Path(run_dir) / AVERAGED
    out = check_file(out if out is not None else default, "average", overwrite, own=default)
    paths = list_checkpoints(Path(run_dir))[-last:]
    if len(paths) < 2:
        raise CheckpointError(N_("{checkpoint_dir} holds {n_paths} checkpoint(s); averaging needs 2+"),
                              checkpoint_dir=checkpoint_dir(run_dir), n_paths=len(paths))
    save_state(average_checkpoints(paths), out)
    return paths, out

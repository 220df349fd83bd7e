"""The run directory drawn (its names are spelled in runs/names.py), the checkpoints in it, and the one way a
checkpoint is written: `new_checkpoint_folder`, then `publish_checkpoint` (single-file and FSDP saves alike).

    RUN_DIR/
      config.json            ModelConfig (what the model is)
      train_config.json      TrainConfig (how it was trained)
      tokenizer_src.json     tokenizers (tokenizer_tgt.json; one file if shared)
      model.safetensors      the weights translate/evaluate use (best on validation, or averaged)
      metrics.jsonl          one JSON record per log / validation event
      decoding.json          the model's own decoding defaults, chosen on validation (config/decoding.py)
      .scratchformer-run     marker: this folder was made by `scratchformer train` (runs/folders.py: --overwrite)
      .lock                  held (flock) by the training that writes the folder; names its pid and host
      export/<format>/       a copy for another engine (--engine ctranslate2 | onnxruntime), stamped with the weights
                             and the sha256 of its files (runs/cache.py)
      checkpoints/
        step-00001000/       model.safetensors + trainer_state.safetensors (every tensor: optimiser moments, RNG
                             states) + trainer_state.json (the rest); FSDP: dcp/ instead of model.safetensors.
                             What the trainer state holds is training/checkpoint.py's business. No pickle anywhere.
        latest               name of the newest complete checkpoint
"""

from __future__ import annotations

import os
import shutil
import tempfile
from collections.abc import Callable, Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer.errors import N_, CheckpointError
from scratchformer.runs import files
from scratchformer.runs.folders import (  # the marker, --overwrite and the lock: the folder owner's
    clear_run,
    holds_run,
    is_marked_run,
    run_lock,
    write_marker,
)
from scratchformer.runs.names import (
    CHECKPOINTS,
    DECODING_FILE,
    LATEST,
    LEGACY_STATE,
    LOCK,
    MARKER,
    STEP_PREFIX,
    TRAINER_JSON,
    TRAINER_TENSORS,
    WEIGHTS,
    step_name,
)
from scratchformer.runs.names import TRAIN_ENTRIES as RUN_ENTRIES

__all__ = ["DECODING_FILE", "LEGACY_STATE", "LOCK", "MARKER", "RUN_ENTRIES", "TRAINER_JSON", "TRAINER_TENSORS",
           "clear_run", "holds_run", "is_marked_run", "run_lock", "write_marker"]


# -- checkpoints/step-N ---------------------------------------------------------------------------------------

def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / CHECKPOINTS


def has_trainer_state(ckpt: Path) -> bool:
    ckpt = Path(ckpt)
    return ((ckpt / TRAINER_JSON).exists() and (ckpt / TRAINER_TENSORS).exists()) or (ckpt / LEGACY_STATE).exists()


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete single-file checkpoints (model.safetensors + trainer state), oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(STEP_PREFIX)
                  and has_trainer_state(p) and (p / WEIGHTS).exists())


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = checkpoint_candidates(run_dir)
    return found[0] if found else None


def checkpoint_candidates(run_dir: Path) -> list[Path]:
    """Complete-looking checkpoints, best first: the one `latest` names, then the others newest first."""
    root = checkpoint_dir(run_dir)
    if not root.exists():
        return []
    found = sorted((p for p in root.iterdir()
                    if p.is_dir() and p.name.startswith(STEP_PREFIX) and has_trainer_state(p)), reverse=True)
    pointer = root / LATEST
    try:
        named = root / pointer.read_text().strip() if pointer.is_file() else None  # not a FIFO: it would block
    except (OSError, UnicodeDecodeError):
        named = None
    if named in found:
        found.remove(named)
        found.insert(0, named)
    return found


def new_checkpoint_folder(run_dir: Path, step: int, shared: bool = False) -> Path:
    """The temporary folder a checkpoint is written into before `publish_checkpoint` renames it: checkpoints/
    .step-N.XXXX (mkdtemp), or with `shared` the one name every rank of a sharded save writes into,
    checkpoints/.step-N.partial (emptied first: a killed save may have left it). Both are partial-save names
    `clean_partial_saves` removes."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    if shared:
        tmp = root / f".{step_name(step)}.partial"
        shutil.rmtree(tmp, ignore_errors=True)
        tmp.mkdir()
    else:
        tmp = Path(tempfile.mkdtemp(prefix=f".{step_name(step)}.", dir=root))
    os.chmod(tmp, 0o777 & ~files.current_umask())  # mkdtemp makes 0700; a finished folder gets the usual ones
    return tmp


def publish_checkpoint(run_dir: Path, tmp: Path, step: int, keep_last: int,
                       complete: Callable[[Path], list[Path]] = list_checkpoints) -> Path:
    """The one way a checkpoint becomes checkpoints/step-N: the written folder `tmp` renamed (atomic), `latest`
    pointed at it, and all but the last `keep_last` of `complete(run_dir)` (checkpoints of the same kind) pruned.
    A crash at any moment leaves the previous checkpoint and `latest` intact."""
    root = checkpoint_dir(run_dir)
    final = root / step_name(step)
    if final.exists():
        shutil.rmtree(final)
    os.replace(tmp, final)
    with files.atomic_path(root / LATEST) as t:
        t.write_text(final.name + "\n")
    for old in complete(run_dir)[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


@contextmanager
def writing_checkpoint(run_dir: Path, step: int, keep_last: int) -> Iterator[Path]:
    """A single-process save: yield a new checkpoint folder to write into, published as checkpoints/step-N when
    the block ends; a failure (a full disk) leaves nothing behind and the previous checkpoints intact."""
    tmp = new_checkpoint_folder(run_dir, step)
    try:
        yield tmp
        publish_checkpoint(run_dir, tmp, step, keep_last)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)


def weights_path(run_dir: Path) -> Path:
    """RUN_DIR/model.safetensors, or the latest checkpoint's when training has not finished yet."""
    path = Path(run_dir) / WEIGHTS
    if path.exists():
        return path
    latest = latest_checkpoint(run_dir)
    if latest is None:
        raise CheckpointError(N_("{path} is missing and {checkpoint_dir} has none: train first"), path=path,
                              checkpoint_dir=checkpoint_dir(run_dir))
    return latest / WEIGHTS


def clean_partial_saves(run_dir: Path) -> list[Path]:
    """Delete what a killed save left behind (checkpoints/.step-N.* folders, .NAME.*.tmp files); returns them."""
    removed = []
    root = checkpoint_dir(run_dir)
    # only names this package makes: atomic_path's ".NAME.XXXX.tmp" for the files a run holds, mkdtemp's ".step-N.*"
    patterns = [(root, f".{STEP_PREFIX}*"), (root, f".{LATEST}.*.tmp")]
    patterns += [(Path(run_dir), f".{n}.*.tmp") for n in RUN_ENTRIES]
    for folder, pattern in patterns:
        for p in folder.glob(pattern) if folder.is_dir() else []:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed

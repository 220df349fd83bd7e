"""The names inside a run directory, and who may touch them.

    RUN_DIR/
      config.json            ModelConfig (what the model is)
      train_config.json      TrainConfig (how it was trained)
      tokenizer_src.json     tokenizers (tokenizer_tgt.json; one file if shared)
      model.safetensors      the weights translate/evaluate use (best on validation, or averaged)
      metrics.jsonl          one JSON record per log / validation event
      decoding.json          the model's own decoding defaults, chosen on validation (config/decoding.py)
      .scratchformer-run     marker: this folder was made by `scratchformer train` (--overwrite checks it)
      .lock                  held (flock) by the training that writes the folder; names its pid and host
      export/<format>/       a copy for another engine (--engine ctranslate2 | onnxruntime), stamped with the weights
      checkpoints/
        step-00001000/       model.safetensors + trainer_state.safetensors (every tensor: optimiser moments, RNG
                             states) + trainer_state.json (the rest); FSDP: dcp/ instead of model.safetensors.
                             What the trainer state holds is training/checkpoint.py's business. No pickle anywhere.
        latest               name of the newest complete checkpoint
"""

from __future__ import annotations

import json
import os
import shutil
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path

from scratchformer.errors import CheckpointError
from scratchformer.runs.files import write_json

MARKER, LOCK = ".scratchformer-run", ".lock"
DECODING_FILE = "decoding.json"  # the run's own decoding defaults (config/decoding.py)
# Everything `scratchformer train` (and `average`, `plot`) writes at the top of a run directory: --overwrite
# deletes these and nothing else.
RUN_ENTRIES = ("config.json", "train_config.json", "tokenizer_src.json", "tokenizer_tgt.json", "model.safetensors",
               "metrics.jsonl", "curve.png", "checkpoints", "averaged.safetensors", "README.json", DECODING_FILE,
               "export", MARKER)
TRAINER_TENSORS, TRAINER_JSON, LEGACY_STATE = "trainer_state.safetensors", "trainer_state.json", "trainer_state.pt"


# -- the marker, --overwrite and the lock ---------------------------------------------------------------------

def write_marker(run_dir: Path) -> None:
    """RUN_DIR/.scratchformer-run: says this folder is a run made by `scratchformer train`."""
    from scratchformer import __version__

    if not (Path(run_dir) / MARKER).exists():
        write_json(Path(run_dir) / MARKER, {"created_by": "scratchformer", "version": __version__})


def is_marked_run(run_dir: Path) -> bool:
    try:
        return json.loads((Path(run_dir) / MARKER).read_text()).get("created_by") == "scratchformer"
    except (OSError, ValueError, AttributeError):
        return False


def holds_run(run_dir: Path) -> bool:
    return (Path(run_dir) / "config.json").exists() or (Path(run_dir) / MARKER).exists()


def clear_run(run_dir: Path, flag: str = "--overwrite") -> list[str]:
    """Delete what `scratchformer train` wrote in `run_dir`, and nothing else; refuse folders it did not make.
    Returns the names of the entries kept (not written by training)."""
    run_dir = Path(run_dir)
    target, here = run_dir.resolve(), Path.cwd().resolve()
    if target == here or target in here.parents:
        raise CheckpointError(f"{flag} {run_dir}: that is the current directory or one of its parents; "
                              "choose a run folder below it")
    if target == Path.home().resolve() or target == Path(target.anchor):
        raise CheckpointError(f"{flag} {run_dir}: refusing to clear the home directory or the file system root; "
                              "choose a run folder")
    if not is_marked_run(run_dir):
        raise CheckpointError(f"{flag} {run_dir}: not made by scratchformer train (no {MARKER} file): delete it "
                              "yourself or choose another --out")
    kept = []
    for entry in sorted(run_dir.iterdir()):
        if entry.name in RUN_ENTRIES:
            if entry.is_dir() and not entry.is_symlink():
                shutil.rmtree(entry)
            else:
                entry.unlink()
        elif entry.name != LOCK:  # held by this process
            kept.append(entry.name)
    return kept


_HELD: dict[str, list] = {}  # resolved run dir -> [open lock file, depth]: the lock is re-entrant in a process


@contextmanager
def run_lock(run_dir: Path) -> Iterator[None]:
    """Hold RUN_DIR/.lock (flock, exclusive) for the block; a second holder fails at once, naming the first.

    The file holds "PID HOST" while locked. The kernel drops a flock when its process dies, so a file left by
    a killed run is not a lock. Re-entrant within one process (the CLI takes it, then the trainer)."""
    import fcntl
    import socket

    key = str(Path(run_dir).resolve())
    if key in _HELD:
        _HELD[key][1] += 1
        try:
            yield
        finally:
            _HELD[key][1] -= 1
        return
    path = Path(run_dir) / LOCK
    f = open(path, "a+", encoding="utf-8")
    try:
        fcntl.flock(f.fileno(), fcntl.LOCK_EX | fcntl.LOCK_NB)
    except BlockingIOError:
        f.seek(0)
        holder = f.read().split()
        f.close()
        who = f"pid {holder[0]} ({' '.join(holder[1:]) or 'unknown host'})" if holder else "another process"
        raise CheckpointError(f"{run_dir} is in use by {who}: wait for it or choose another --out") from None
    f.seek(0)
    f.truncate()
    f.write(f"{os.getpid()} {socket.gethostname()}\n")
    f.flush()
    _HELD[key] = [f, 0]
    try:
        yield
    finally:
        del _HELD[key]
        f.truncate(0)  # before unlocking: a new holder writes its own pid after taking the lock
        f.close()  # closing drops the flock


# -- checkpoints/step-N ---------------------------------------------------------------------------------------

def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def has_trainer_state(ckpt: Path) -> bool:
    ckpt = Path(ckpt)
    return ((ckpt / TRAINER_JSON).exists() and (ckpt / TRAINER_TENSORS).exists()) or (ckpt / LEGACY_STATE).exists()


def list_checkpoints(run_dir: Path) -> list[Path]:
    """Complete single-file checkpoints (model.safetensors + trainer state), oldest first."""
    root = checkpoint_dir(run_dir)
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-")
                  and has_trainer_state(p) and (p / "model.safetensors").exists())


def latest_checkpoint(run_dir: Path) -> Path | None:
    found = checkpoint_candidates(run_dir)
    return found[0] if found else None


def checkpoint_candidates(run_dir: Path) -> list[Path]:
    """Complete-looking checkpoints, best first: the one `latest` names, then the others newest first."""
    root = checkpoint_dir(run_dir)
    if not root.exists():
        return []
    found = sorted((p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-") and has_trainer_state(p)),
                   reverse=True)
    pointer = root / "latest"
    try:
        named = root / pointer.read_text().strip() if pointer.is_file() else None  # not a FIFO: it would block
    except (OSError, UnicodeDecodeError):
        named = None
    if named in found:
        found.remove(named)
        found.insert(0, named)
    return found


def weights_path(run_dir: Path) -> Path:
    """RUN_DIR/model.safetensors, or the latest checkpoint's when training has not finished yet."""
    path = Path(run_dir) / "model.safetensors"
    if path.exists():
        return path
    latest = latest_checkpoint(run_dir)
    if latest is None:
        raise CheckpointError(f"{path} is missing and {run_dir}/checkpoints has none: train first")
    return latest / "model.safetensors"


def clean_partial_saves(run_dir: Path) -> list[Path]:
    """Delete what a killed save left behind (checkpoints/.step-N.* folders, .NAME.*.tmp files); returns them."""
    removed = []
    root = checkpoint_dir(run_dir)
    # only names this package makes: atomic_path's ".NAME.XXXX.tmp" for the files a run holds, mkdtemp's ".step-N.*"
    patterns = [(root, ".step-*"), (root, ".latest.*.tmp")] + [(Path(run_dir), f".{n}.*.tmp") for n in RUN_ENTRIES]
    for folder, pattern in patterns:
        for p in folder.glob(pattern) if folder.is_dir() else []:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed

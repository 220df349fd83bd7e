"""Run directories and checkpoints, written atomically (temporary name + rename) so that a crash, a full
disk or a kill at any moment leaves the previous checkpoint intact.

    RUN_DIR/
      config.json            ModelConfig (what the model is)
      train_config.json      TrainConfig (how it was trained)
      tokenizer_src.json     tokenizers (tokenizer_tgt.json; one file if shared)
      model.safetensors      the weights translate/evaluate use (best on validation, or averaged)
      metrics.jsonl          one JSON record per log / validation event
      .scratchformer-run     marker: this folder was made by `scratchformer train` (--overwrite checks it)
      .lock                  held (flock) by the training that writes the folder; names its pid and host
      checkpoints/
        step-00001000/       model.safetensors + trainer_state.safetensors (every tensor: optimiser moments, RNG
                             states) + trainer_state.json (the rest: step, epoch, data position, scheduler, the
                             optimiser's param groups; tensors referenced by key). No pickle anywhere.
        latest               name of the newest complete checkpoint

Loading never unpickles: a legacy trainer_state.pt is read with torch.load(weights_only=True) and refused
if it holds anything but plain tensors and containers.
"""

from __future__ import annotations

import json
import math
import os
import re
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from scratchformer.config import ModelConfig, regular_file
from scratchformer.errors import ScratchformerError


class CheckpointError(ScratchformerError):
    """A run directory or checkpoint that is missing files or does not match the config."""


class UnsafeCheckpointError(CheckpointError):
    """A checkpoint file that would run code when loaded (a pickle with foreign globals): refused, and never a
    reason to fall back quietly to an older checkpoint."""


class CheckpointWriteError(CheckpointError, OSError):
    """A save that failed (full disk, no permission): one line naming the file; the previous one is intact.
    Also an OSError, so callers that catch write failures keep working."""


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it over `path` (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    try:
        yield tmp
        # mkstemp (and safetensors' writer) make 0600; a finished file gets the usual permissions (umask)
        os.chmod(tmp, 0o666 & ~current_umask())
        with open(tmp, "rb") as f:
            os.fsync(f.fileno())
        os.replace(tmp, path)
    finally:
        tmp.unlink(missing_ok=True)


def write_json(path: Path, data: Any) -> None:
    with atomic_path(path) as tmp:
        tmp.write_text(json.dumps(data, indent=2, ensure_ascii=False) + "\n", encoding="utf-8")


def state_dict_for_saving(model: torch.nn.Module, dtype: torch.dtype | None = None) -> dict[str, torch.Tensor]:
    """The model's tensors with tied weights stored once (safetensors refuses shared memory)."""
    seen: dict[int, str] = {}
    out = {}
    for name, tensor in model.state_dict().items():
        key = tensor.data_ptr()
        if key in seen and tensor.numel() > 0:
            continue  # a tied weight: restored by the model's own tying when loaded
        seen[key] = name
        t = tensor.detach().cpu()
        if dtype is not None and t.is_floating_point():
            t = t.to(dtype)
        out[name] = t.contiguous()
    return out


def save_weights(model: torch.nn.Module, path: Path, dtype: torch.dtype | None = None) -> None:
    """One safetensors file, atomically: a failed write (full disk) leaves the previous file and says so."""
    try:
        with atomic_path(path) as tmp:
            save_file(state_dict_for_saving(model, dtype), str(tmp), metadata={"format": "pt"})
    except OSError as e:
        raise CheckpointWriteError(f"cannot write {path}: {e.strerror or e} (the previous file, if any, is intact); "
                              "free space or fix the folder's permissions") from None


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`, explaining mismatches in one line."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} is missing: the run directory holds no weights (was training finished?)")
    regular_file(path, CheckpointError)  # a FIFO would block the read for ever
    try:
        tensors = load_file(str(path))
    except Exception as e:  # a truncated or foreign file
        raise CheckpointError(f"{path} is not a readable safetensors file: {e}") from None
    own = model.state_dict()
    for name, t in tensors.items():
        if name in own and own[name].shape != t.shape:
            raise CheckpointError(f"{path}: tensor {name} has shape {tuple(t.shape)} but the config builds "
                                  f"{tuple(own[name].shape)}: the checkpoint comes from another config")
    unexpected = sorted(set(tensors) - set(own))
    if unexpected:
        raise CheckpointError(f"{path}: unexpected tensors {unexpected[:3]}: the checkpoint comes from another "
                              "config or architecture")
    missing = [n for n in own if n not in tensors and own[n].data_ptr() not in
               {own[m].data_ptr() for m in tensors if m in own}]
    if missing:
        raise CheckpointError(f"{path}: missing tensors {missing[:3]}: the checkpoint comes from another config")
    for name, t in tensors.items():  # every check before the first copy: a bad file leaves the model as it was
        check_tensor(path, name, t, own[name])
    with torch.no_grad():
        for name, t in tensors.items():
            own[name].copy_(t.to(own[name].dtype))


def check_tensor(path: Path, name: str, t: torch.Tensor, like: torch.Tensor) -> None:
    """A one-line CheckpointError for a stored tensor that is not a finite float where `like` is a float."""
    if not like.is_floating_point():
        return
    if not t.is_floating_point():
        raise CheckpointError(f"{path}: tensor {name} is {t.dtype}, not a floating-point tensor: the file was not "
                              "written by scratchformer (or was altered)")
    if not bool(torch.isfinite(t).all()):
        raise CheckpointError(f"{path}: tensor {name} holds non-finite values (nan or inf): training diverged "
                              "before this was saved; use an earlier checkpoint or train again")


def load_config(run_dir: Path) -> ModelConfig:
    path = Path(run_dir) / "config.json"
    if Path(run_dir).exists() and not Path(run_dir).is_dir():
        raise CheckpointError(f"{run_dir} is not a run directory (it is a file): give the folder of a run")
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"run directory {run_dir} does not exist")
    if not path.exists():
        raise CheckpointError(f"{path} is missing: not a scratchformer run directory")
    return ModelConfig.load(path)


# -- the run directory: its marker and its lock ----------------------------------------------------------

MARKER, LOCK = ".scratchformer-run", ".lock"
# Everything `scratchformer train` (and `average`, `plot`) writes at the top of a run directory: --overwrite
# deletes these and nothing else.
RUN_ENTRIES = ("config.json", "train_config.json", "tokenizer_src.json", "tokenizer_tgt.json", "model.safetensors",
               "metrics.jsonl", "curve.png", "checkpoints", "averaged.safetensors", "README.json", MARKER)


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


# -- training checkpoints ---------------------------------------------------------------------------------

def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


TRAINER_TENSORS, TRAINER_JSON, LEGACY_STATE = "trainer_state.safetensors", "trainer_state.json", "trainer_state.pt"


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
                    raise CheckpointError(f"{where}: tensor {value!r} is missing: the checkpoint is incomplete")
                return tensors[value]
            if tag == "__tuple__":
                return tuple(walk(v) for v in value)
            if tag == "__items__":
                return {k: walk(v) for k, v in value}
            if tag == "__float__":
                return float(value)
        return {k: walk(v) for k, v in x.items()}

    return walk(skeleton)


def save_tensors(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """safetensors' save_file, then the permissions the umask asks for (its writer makes files 0600)."""
    save_file(tensors, str(path), metadata={"format": "pt"})
    os.chmod(path, 0o666 & ~current_umask())


def write_trainer_state(folder: Path, state: dict[str, Any]) -> None:
    """trainer_state.json + trainer_state.safetensors in `folder` (a temporary checkpoint folder)."""
    skeleton, tensors = flatten_state(state)
    save_tensors(tensors, Path(folder) / TRAINER_TENSORS)
    (Path(folder) / TRAINER_JSON).write_text(json.dumps(skeleton, indent=1, allow_nan=False) + "\n", encoding="utf-8")


def has_trainer_state(ckpt: Path) -> bool:
    ckpt = Path(ckpt)
    return ((ckpt / TRAINER_JSON).exists() and (ckpt / TRAINER_TENSORS).exists()) or (ckpt / LEGACY_STATE).exists()


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    """The trainer state of checkpoints/step-N (JSON + safetensors; a legacy .pt only if it is plain tensors)."""
    ckpt = Path(ckpt)
    if not (ckpt / TRAINER_JSON).exists() and (ckpt / LEGACY_STATE).exists():
        return _load_legacy_state(ckpt / LEGACY_STATE)
    path = ckpt / TRAINER_JSON
    try:
        skeleton = json.loads(path.read_text(encoding="utf-8"))
    except FileNotFoundError:
        raise CheckpointError(f"{path} is missing: the checkpoint is incomplete") from None
    except (UnicodeDecodeError, json.JSONDecodeError) as e:
        raise CheckpointError(f"{path} is not valid JSON (a truncated or damaged file): {e}") from None
    try:
        tensors = load_file(str(ckpt / TRAINER_TENSORS))
    except Exception as e:  # missing, truncated or foreign
        raise CheckpointError(f"{ckpt / TRAINER_TENSORS} is not a readable safetensors file: {e}") from None
    state = unflatten_state(skeleton, tensors, path)
    if not isinstance(state, dict) or "step" not in state:
        raise CheckpointError(f"{path} is not a scratchformer trainer state (no step)")
    return state


def _load_legacy_state(path: Path) -> dict[str, Any]:
    """A trainer_state.pt of older versions, through torch's weights-only unpickler (no code can run)."""
    try:
        state = torch.load(path, map_location="cpu", weights_only=True)
    except Exception as e:
        text = re.sub(r"\x1b\[[0-9;]*m", "", str(e)).strip()
        why = re.search(r"Unsupported global: GLOBAL (\S+)", text)
        detail = f"it references {why.group(1)}" if why else (text.splitlines()[0][:200] if text else type(e).__name__)
        raise UnsafeCheckpointError(f"refusing to unpickle {path}: not a plain tensor file ({detail}); "
                                    "delete that checkpoint folder if you did not write it") from None
    if not isinstance(state, dict):
        raise CheckpointError(f"{path} is not a scratchformer trainer state")
    return state


def save_checkpoint(run_dir: Path, step: int, model: torch.nn.Module, trainer_state: dict[str, Any],
                    keep_last: int = 5) -> Path:
    """Write checkpoints/step-N/ as a whole (temp dir + rename), point `latest` at it, prune old ones.

    A failed write (a full disk) raises a one-line CheckpointError; the previous checkpoints stay intact."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:08d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".step-{step:08d}.", dir=root))
    os.chmod(tmp, 0o777 & ~current_umask())  # mkdtemp makes 0700; a finished folder gets the usual permissions
    try:
        save_tensors(state_dict_for_saving(model), tmp / "model.safetensors")
        write_trainer_state(tmp, trainer_state)
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
        with atomic_path(root / "latest") as t:
            t.write_text(final.name + "\n")
    except OSError as e:
        previous = latest_checkpoint(run_dir)
        kept = f"the previous checkpoint {previous.name} is intact" if previous else "no earlier checkpoint"
        raise CheckpointWriteError(f"cannot write checkpoint {final}: {e.strerror or e} ({kept}); free space or "
                              "fix the folder's permissions, then --resume") from None
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    steps = list_checkpoints(run_dir)
    for old in steps[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def current_umask() -> int:
    umask = os.umask(0)
    os.umask(umask)
    return umask


def list_checkpoints(run_dir: Path) -> list[Path]:
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


def clean_partial_saves(run_dir: Path) -> list[Path]:
    """Delete what a killed save left behind (checkpoints/.step-N.* folders, .NAME.*.tmp files); returns them."""
    removed = []
    root = checkpoint_dir(run_dir)
    # only names this module makes: atomic_path's ".NAME.XXXX.tmp" for the files a run holds, mkdtemp's ".step-N.*"
    patterns = [(root, ".step-*"), (root, ".latest.*.tmp")] + [(Path(run_dir), f".{n}.*.tmp") for n in RUN_ENTRIES]
    for folder, pattern in patterns:
        for p in folder.glob(pattern) if folder.is_dir() else []:
            if p.is_dir() and not p.is_symlink():
                shutil.rmtree(p, ignore_errors=True)
            else:
                p.unlink(missing_ok=True)
            removed.append(p)
    return removed


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the weights of several checkpoints (the paper averages the last 5)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    first = Path(paths[0]) / "model.safetensors"
    shapes: dict[str, tuple[int, ...]] = {}
    for p in paths:
        path = Path(p) / "model.safetensors"
        try:
            tensors = load_file(str(path))
        except Exception as e:
            raise CheckpointError(f"{path} is not a readable safetensors file: {e}") from None
        here = {name: tuple(t.shape) for name, t in tensors.items()}
        if not shapes:
            shapes = here
        elif here != shapes:
            diff = sorted(set(here) ^ set(shapes)) or sorted(n for n in here if here[n] != shapes[n])
            raise CheckpointError(f"cannot average {first} and {path}: they come from different configs "
                                  f"(tensor {diff[0]} differs)")
        for name, t in tensors.items():
            total[name] = total.get(name, 0) + t.double()
    return {name: (t / len(paths)).float() for name, t in total.items()}


def average_last(run_dir: str | Path, last: int, out: str | Path | None) -> tuple[list[Path], Path]:
    """Average the last `last` checkpoints of a run into `out` (default RUN_DIR/averaged.safetensors), written
    atomically; return the checkpoints averaged and the file written."""
    if last < 1:
        raise CheckpointError(f"--last {last}: give the number of checkpoints to average (2 or more)")
    paths = list_checkpoints(Path(run_dir))[-last:]
    if len(paths) < 2:
        raise CheckpointError(f"{run_dir}/checkpoints holds {len(paths)} checkpoint(s); averaging needs 2+")
    out = Path(out or Path(run_dir) / "averaged.safetensors")
    with atomic_path(out) as tmp:
        save_file(average_checkpoints(paths), str(tmp), metadata={"format": "pt"})
    return paths, out

"""Run directories and checkpoints, written atomically (temporary name + rename) so that a crash, a full
disk or a kill at any moment leaves the previous checkpoint intact.

    RUN_DIR/
      config.json            ModelConfig (what the model is)
      train_config.json      TrainConfig (how it was trained)
      tokenizer_src.json     tokenizers (tokenizer_tgt.json; one file if shared)
      model.safetensors      the weights translate/evaluate use (best on validation, or averaged)
      metrics.jsonl          one JSON record per log / validation event
      checkpoints/
        step-00001000/       model.safetensors + trainer_state.pt (optimiser, scheduler, RNG, data position)
        latest               name of the newest complete checkpoint
"""

from __future__ import annotations

import json
import os
import shutil
import tempfile
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file, save_file

from scratchformer.config import ModelConfig
from scratchformer.errors import ScratchformerError


class CheckpointError(ScratchformerError):
    """A run directory or checkpoint that is missing files or does not match the config."""


@contextmanager
def atomic_path(path: Path) -> Iterator[Path]:
    """Yield a temporary path beside `path`; on success rename it over `path` (atomic on POSIX)."""
    path = Path(path)
    path.parent.mkdir(parents=True, exist_ok=True)
    fd, tmp = tempfile.mkstemp(prefix=f".{path.name}.", suffix=".tmp", dir=path.parent)
    os.close(fd)
    tmp = Path(tmp)
    umask = os.umask(0)
    os.umask(umask)
    os.chmod(tmp, 0o666 & ~umask)  # mkstemp makes 0600; a finished file gets the usual permissions
    try:
        yield tmp
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
    with atomic_path(path) as tmp:
        save_file(state_dict_for_saving(model, dtype), str(tmp), metadata={"format": "pt"})


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`, explaining mismatches in one line."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(f"{path} is missing: the run directory holds no weights (was training finished?)")
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
    with torch.no_grad():
        for name, t in tensors.items():
            own[name].copy_(t.to(own[name].dtype))


def load_config(run_dir: Path) -> ModelConfig:
    path = Path(run_dir) / "config.json"
    if not Path(run_dir).is_dir():
        raise CheckpointError(f"run directory {run_dir} does not exist")
    if not path.exists():
        raise CheckpointError(f"{path} is missing: not a scratchformer run directory")
    return ModelConfig.load(path)


# -- training checkpoints ---------------------------------------------------------------------------------

def checkpoint_dir(run_dir: Path) -> Path:
    return Path(run_dir) / "checkpoints"


def save_checkpoint(run_dir: Path, step: int, model: torch.nn.Module, trainer_state: dict[str, Any],
                    keep_last: int = 5) -> Path:
    """Write checkpoints/step-N/ as a whole (temp dir + rename), point `latest` at it, prune old ones."""
    root = checkpoint_dir(run_dir)
    root.mkdir(parents=True, exist_ok=True)
    final = root / f"step-{step:08d}"
    tmp = Path(tempfile.mkdtemp(prefix=f".step-{step:08d}.", dir=root))
    try:
        save_file(state_dict_for_saving(model), str(tmp / "model.safetensors"), metadata={"format": "pt"})
        torch.save(trainer_state, tmp / "trainer_state.pt")
        if final.exists():
            shutil.rmtree(final)
        os.replace(tmp, final)
    finally:
        if tmp.exists():
            shutil.rmtree(tmp, ignore_errors=True)
    with atomic_path(root / "latest") as t:
        t.write_text(final.name + "\n")
    steps = list_checkpoints(run_dir)
    for old in steps[:-keep_last] if keep_last > 0 else []:
        shutil.rmtree(old, ignore_errors=True)
    return final


def list_checkpoints(run_dir: Path) -> list[Path]:
    root = checkpoint_dir(run_dir)
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith("step-")
                  and (p / "trainer_state.pt").exists() and (p / "model.safetensors").exists())


def latest_checkpoint(run_dir: Path) -> Path | None:
    root = checkpoint_dir(run_dir)
    pointer = root / "latest"
    if pointer.exists():
        cand = root / pointer.read_text().strip()
        if (cand / "trainer_state.pt").exists():
            return cand
    found = list_checkpoints(run_dir)
    return found[-1] if found else None


def load_trainer_state(ckpt: Path) -> dict[str, Any]:
    return torch.load(Path(ckpt) / "trainer_state.pt", map_location="cpu", weights_only=False)


def average_checkpoints(paths: list[Path]) -> dict[str, torch.Tensor]:
    """Element-wise mean of the weights of several checkpoints (the paper averages the last 5)."""
    if not paths:
        raise CheckpointError("no checkpoints to average")
    total: dict[str, torch.Tensor] = {}
    for p in paths:
        for name, t in load_file(str(Path(p) / "model.safetensors")).items():
            total[name] = total.get(name, 0) + t.double()
    return {name: (t / len(paths)).float() for name, t in total.items()}

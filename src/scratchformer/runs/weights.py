"""Model weights <-> one safetensors file. Tied weights are stored once; loading checks every tensor (name,
shape, dtype, finite values) before the first copy, so a bad file leaves the model as it was."""

from __future__ import annotations

from pathlib import Path

import torch
from safetensors.torch import load_file

from scratchformer.config import regular_file
from scratchformer.errors import N_, CheckpointError, CheckpointWriteError
from scratchformer.runs import files


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
    save_state(state_dict_for_saving(model, dtype), path)


def save_state(tensors: dict[str, torch.Tensor], path: Path) -> None:
    """Tensors (a state dict, an average) as one safetensors file, atomically, or a one-line error."""
    try:
        with files.atomic_path(path) as tmp:
            files.save_tensors(tensors, tmp)
    except OSError as e:
        raise CheckpointWriteError(N_("cannot write {path}: {value} (the previous file, if any, is intact); free "
                                      "space or fix the folder's permissions"), path=path,
                                   value=e.strerror or e) from None


def read_tensors(path: Path) -> dict[str, torch.Tensor]:
    """The tensors of a safetensors file, or a one-line CheckpointError (missing, a FIFO, truncated, foreign)."""
    path = Path(path)
    if not path.exists():
        raise CheckpointError(N_("{path} is missing: the run directory holds no weights (was training finished?)"),
                              path=path)
    regular_file(path, CheckpointError)  # a FIFO would block the read for ever
    try:
        return load_file(str(path))
    except Exception as e:  # a truncated or foreign file
        raise CheckpointError(N_("{path} is not a readable safetensors file: {e}"), path=path, e=e) from None


def load_weights(model: torch.nn.Module, path: Path) -> None:
    """Load safetensors weights into `model`, explaining mismatches in one line."""
    path = Path(path)
    tensors = read_tensors(path)
    own = model.state_dict()
    for name, t in tensors.items():
        if name in own and own[name].shape != t.shape:
            raise CheckpointError(N_("{path}: tensor {name} has shape {shape} but the config builds {shape2}: the "
                                     "checkpoint comes from another config"), path=path, name=name,
                                  shape=tuple(t.shape), shape2=tuple(own[name].shape))
    unexpected = sorted(set(tensors) - set(own))
    if unexpected:
        raise CheckpointError(N_("{path}: unexpected tensors {unexpected}: the checkpoint comes from another config "
                                 "or architecture"), path=path, unexpected=unexpected[:3])
    missing = [n for n in own if n not in tensors and own[n].data_ptr() not in
               {own[m].data_ptr() for m in tensors if m in own}]
    if missing:
        raise CheckpointError(N_("{path}: missing tensors {missing}: the checkpoint comes from another config"),
                              path=path, missing=missing[:3])
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
        raise CheckpointError(N_("{path}: tensor {name} is {dtype}, not a floating-point tensor: the file was not "
                                 "written by scratchformer (or was altered)"), path=path, name=name, dtype=t.dtype)
    if not bool(torch.isfinite(t).all()):
        raise CheckpointError(N_("{path}: tensor {name} holds non-finite values (nan or inf): training diverged "
                                 "before this was saved; use an earlier checkpoint or train again"), path=path,
                              name=name)

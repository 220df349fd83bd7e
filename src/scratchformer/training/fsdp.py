"""Fully sharded data parallel (FSDP2): each rank keeps 1/world_size of every weight, gradient and Adam moment,
and all-gathers a layer's weights just before it runs (`--fsdp` under torchrun).

    shard_model            fully_shard each encoder/decoder layer, then the root (embeddings, generator, norms)
    save_fsdp_checkpoint   checkpoints/step-N/ = dcp/ (one shard file per rank, torch.distributed.checkpoint)
                           + trainer_state.json + trainer_state.safetensors; written into a temporary folder that
                           rank 0 renames after a barrier
    load_sharded_state     weights + optimiser from such a checkpoint into a sharded, replicated (DDP) or plain
                           model: DCP reshards on load, so the world size may change between runs
    save_full_weights      gather the full weights (a collective) and write one model.safetensors on rank 0
    root_unsharded         gather the root's weights while decoding (BLEU on validation) calls submodules directly
    consolidate            one model.safetensors from a sharded checkpoint, in one process with no process group
                           (`scratchformer consolidate RUN_DIR`)

Tied weights. With `tie_embeddings` the target embedding, the generator (and the source embedding when the
vocabularies match) are one Parameter. All of them live outside the encoder/decoder layers, so they belong
to the root's parameter group: the shared matrix is sharded once and gathered once per forward, and the tie
survives sharding. `shard_model` checks that no parameter is shared between a layer and anything outside it
(that would give one Parameter two owners); untie such weights before sharding.

Reading a sharded checkpoint runs no code from it: DCP pickles its .metadata, so `SafeFileSystemReader` unpickles
it with an allow-list of DCP's own classes, and the shards' non-tensor values go through torch.load's
weights-only unpickler (`SafeLoadPlanner`); a shard file shorter than the metadata says is named before loading.

Checkpoints are written to the run directory by every rank: with several machines it must be on a shared
file system. Mixed precision is the trainer's autocast (`--dtype bf16`); weights stay fp32.
"""

from __future__ import annotations

import importlib
import io
import pickle
import re
import warnings
from collections.abc import Iterator
from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer import runs
from scratchformer.errors import N_, CheckpointError, ConfigError, UnsafeCheckpointError
from scratchformer.runs.folders import check_file
from scratchformer.runs.layout import new_checkpoint_folder, publish_checkpoint
from scratchformer.runs.names import SHARDS, STEP_PREFIX, WEIGHTS, step_name
from scratchformer.runs.weights import save_state
from scratchformer.training import checkpoint as ckpt
from scratchformer.training import distributed as dist_utils
from scratchformer.training.distributed import DistInfo


def fully_shard_fn():
    """torch's FSDP2 entry point, or a ConfigError naming the version that has it."""
    try:
        fsdp = importlib.import_module("torch.distributed.fsdp")
    except ImportError:  # a torch built without torch.distributed
        fsdp = None
    if not hasattr(fsdp, "fully_shard"):
        raise ConfigError(N_("FSDP needs torch >= 2.6 (fully_shard); this is torch {version}"),
                          version=torch.__version__)
    return fsdp.fully_shard


def _layers(model: nn.Module) -> list[tuple[str, nn.Module]]:
    """(name, module) of every encoder and decoder layer: the units that are sharded and gathered one by one."""
    found = []
    for stack in ("encoder", "decoder"):
        layers = getattr(getattr(model, stack, None), "layers", None)
        for i, layer in enumerate(layers if layers is not None else []):
            found.append((f"{stack}.layers.{i}", layer))
    return found


def _check_ties(model: nn.Module, layers: list[tuple[str, nn.Module]]) -> None:
    """A Parameter shared between a layer and the rest of the model cannot be sharded by both owners."""
    for prefix, layer in layers:
        inside = {id(p) for p in layer.parameters()}
        for name, p in model.named_parameters(remove_duplicate=False):
            if id(p) in inside and not name.startswith(prefix + "."):
                raise ConfigError(N_("parameter {name} is tied to a parameter of {prefix}: FSDP shards each layer "
                                     "separately, so untie it (or share it only outside the layers)"), name=name,
                                  prefix=prefix)


def shard_model(model: nn.Module, info: DistInfo) -> nn.Module:
    """Shard `model` in place over all ranks (layers first, then the root) and return it."""
    fully_shard = fully_shard_fn()
    from torch.distributed.device_mesh import init_device_mesh

    layers = _layers(model)
    _check_ties(model, layers)
    mesh = init_device_mesh(info.device.type, (info.world_size,))  # 1-D: plain FSDP over every rank
    for _, layer in layers:
        fully_shard(layer, mesh=mesh)
    fully_shard(model, mesh=mesh)
    # The generator's (B, L, V) logits are a view (a matmul reshaped); FSDP warns that an in-place op on it
    # would skip a hook. The loss only reads the logits (reshape, index, log_softmax), so the warning is noise.
    warnings.filterwarnings("ignore", message=r"FSDP2-wrapped module .* returned a view tensor")
    return model


def is_sharded(model: nn.Module) -> bool:
    try:
        from torch.distributed.fsdp import FSDPModule
    except ImportError:
        return False
    return isinstance(model, FSDPModule)


@contextmanager
def root_unsharded(model: nn.Module) -> Iterator[nn.Module]:
    """Decoding calls model.encode / tgt_embed / decoder / generator, never model.forward, so FSDP's root hooks
    would not gather the embeddings and generator: gather them for the block (the layers still gather their own
    weights in their forward). Every rank must decode the same inputs: each gather is a collective."""
    if not is_sharded(model):
        yield model
        return
    model.unshard()
    try:
        yield model
    finally:
        model.reshard()


# -- full weights ----------------------------------------------------------------------------------------------

def tied_names(model: nn.Module) -> set[str]:
    """Names of parameters that repeat an earlier one (the generator when tied): stored once, as unsharded."""
    seen: set[int] = set()
    tied = set()
    for name, p in model.named_parameters(remove_duplicate=False):
        if id(p) in seen:
            tied.add(name)
        seen.add(id(p))
    return tied


def full_state_dict(model: nn.Module) -> dict[str, torch.Tensor]:
    """The unsharded weights on CPU, on rank 0 only (other ranks get {}); a collective: every rank calls it."""
    from torch.distributed.checkpoint.state_dict import StateDictOptions, get_model_state_dict

    options = StateDictOptions(full_state_dict=True, cpu_offload=True)
    state = get_model_state_dict(model, options=options)
    tied = tied_names(model)
    return {k: v.contiguous() for k, v in state.items() if k not in tied}


def save_full_weights(model: nn.Module, path: Path, info: DistInfo) -> None:
    """Gather the sharded weights and write them as one safetensors file on rank 0 (the format of a 1-GPU run)."""
    state = full_state_dict(model)
    if info.is_main:
        save_state(state, Path(path))
    dist_utils.barrier(info)


# -- sharded checkpoints ---------------------------------------------------------------------------------------

def is_sharded_checkpoint(path: Path) -> bool:
    return (Path(path) / SHARDS / ".metadata").exists()


def list_sharded_checkpoints(run_dir: Path) -> list[Path]:
    root = runs.checkpoint_dir(run_dir)
    if not root.exists():
        return []
    return sorted(p for p in root.iterdir() if p.is_dir() and p.name.startswith(STEP_PREFIX)
                  and runs.has_trainer_state(p) and is_sharded_checkpoint(p))


def save_fsdp_checkpoint(run_dir: Path, step: int, model: nn.Module, optimizer: torch.optim.Optimizer,
                         state: dict[str, Any], keep_last: int, info: DistInfo) -> Path:
    """checkpoints/step-N/{dcp/, trainer_state.json, trainer_state.safetensors}: every rank writes its shards
    into a temporary folder, then rank 0 renames it and points `latest` at it. A crash at any moment leaves the
    previous checkpoint intact. `state`: the trainer's counters and RNG (the optimiser's moments go to dcp/)."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_state_dict

    tmp = runs.checkpoint_dir(run_dir) / f".{step_name(step)}.partial"  # one name for all ranks: all write into it
    if info.is_main:
        tmp = new_checkpoint_folder(run_dir, step, shared=True)
    dist_utils.barrier(info)
    model_state, optim_state = get_state_dict(model, optimizer)
    dcp.save({"model": model_state, "optim": optim_state}, checkpoint_id=str(tmp / SHARDS))
    if info.is_main:
        ckpt.write_trainer_state(tmp, {**state, "sharded": True})
    dist_utils.barrier(info)  # every rank's shard file is complete
    final = runs.checkpoint_dir(run_dir) / step_name(step)
    if info.is_main:  # the one checkpoint writer's publishing step (runs/layout.py), pruning sharded checkpoints
        final = publish_checkpoint(run_dir, tmp, step, keep_last, complete=list_sharded_checkpoints)
    dist_utils.barrier(info)  # nobody reads `latest` or exits before it points at the new checkpoint
    return final


def load_sharded_state(model: nn.Module, optimizer: torch.optim.Optimizer | None, path: Path) -> None:
    """Weights (and optimiser state) from checkpoints/step-N/dcp into `model`: FSDP-sharded over any number of
    ranks, DDP-wrapped, or a plain module in a single process (DCP then reads every shard)."""
    from torch.distributed.checkpoint.state_dict import get_state_dict, set_state_dict

    shards = Path(path) / SHARDS
    if not (shards / ".metadata").exists():
        raise CheckpointError(N_("{path} holds no sharded checkpoint ({shards}/.metadata is missing)"), path=path,
                              shards=shards)
    if optimizer is None:
        from torch.distributed.checkpoint.state_dict import get_model_state_dict, set_model_state_dict

        state = {"model": get_model_state_dict(model)}
        _dcp_load(state, shards)
        set_model_state_dict(model, state["model"])
        return
    model_state, optim_state = get_state_dict(model, optimizer)  # also creates Adam's moments to load into
    state = {"model": model_state, "optim": optim_state}
    _dcp_load(state, shards)
    set_state_dict(model, optimizer, model_state_dict=state["model"], optim_state_dict=state["optim"])


def _dcp_load(state: dict[str, Any], shards: Path) -> None:
    """dcp.load, in place, reading nothing but DCP's own metadata and plain tensors; a damaged checkpoint is a
    one-line CheckpointError. Without a process group it reads every rank's shards (what we want: no warning)."""
    import torch.distributed.checkpoint as dcp

    check_shard_files(shards)
    with warnings.catch_warnings():
        warnings.filterwarnings("ignore", message="torch.distributed is disabled, unavailable or uninitialized")
        try:
            dcp.load(state, storage_reader=safe_reader_class()(str(shards)), planner=safe_planner_class()())
        except CheckpointError:
            raise
        except Exception as e:  # DCP wraps a rank's failure (a damaged shard) in CheckpointException
            unsafe = re.search(r"refusing to unpickle [^\n]*", str(e))
            if unsafe:
                raise UnsafeCheckpointError(N_("{shards}: {group}"), shards=shards, group=unsafe.group(0)) from None
            first = next((ln.strip() for ln in str(e).splitlines() if ln.strip()), type(e).__name__)
            raise CheckpointError(N_("{shards}: cannot read the sharded checkpoint ({first})"), shards=shards,
                                  first=first[:300]) from None


# -- reading DCP checkpoints without running code from them ---------------------------------------------------

_DCP_METADATA = "torch.distributed.checkpoint.metadata"
_ALLOWED = {("torch", "Size"), ("torch.distributed.checkpoint.filesystem", "_StorageInfo"),
            ("torch.serialization", "_get_layout"), ("collections", "OrderedDict"), ("pathlib", "PosixPath"),
            ("pathlib", "PurePosixPath"), ("builtins", "set"), ("builtins", "frozenset")}


class _MetadataUnpickler(pickle.Unpickler):
    """Unpickles DCP's .metadata: its dataclasses, torch.Size, dtypes and plain containers, nothing else."""

    def __init__(self, file, path: Path) -> None:
        super().__init__(file)
        self.path = path

    def find_class(self, module: str, name: str) -> Any:
        if module == _DCP_METADATA or (module, name) in _ALLOWED or \
                (module == "torch" and isinstance(getattr(torch, name, None), torch.dtype)):
            return super().find_class(module, name)
        raise UnsafeCheckpointError(N_("refusing to unpickle {path}: it references {module}.{name}, which is not "
                                       "part of a torch.distributed.checkpoint metadata file"), path=self.path,
                                    module=module, name=name)


def read_dcp_metadata(path: Path) -> Any:
    """The Metadata of a DCP checkpoint (its .metadata file), through the allow-list unpickler."""
    path = Path(path)
    try:
        with open(path, "rb") as f:
            metadata = _MetadataUnpickler(f, path).load()
    except CheckpointError:
        raise
    except FileNotFoundError:
        raise CheckpointError(N_("{path} is missing: the sharded checkpoint is incomplete"), path=path) from None
    except Exception as e:  # truncated or foreign: EOFError, UnpicklingError, ...
        raise CheckpointError(N_("{path} is not a readable checkpoint metadata file ({name}: {e})"), path=path,
                              name=type(e).__name__, e=e) from None
    from torch.distributed.checkpoint.metadata import Metadata

    if not isinstance(metadata, Metadata):
        raise CheckpointError(N_("{path} is not a torch.distributed.checkpoint metadata file"), path=path)
    return metadata


def check_shard_files(shards: Path) -> None:
    """Every shard file the metadata points into exists and is long enough (a truncated copy is named here)."""
    metadata = read_dcp_metadata(Path(shards) / ".metadata")
    need: dict[str, int] = {}
    for info in (metadata.storage_data or {}).values():
        end = int(info.offset) + int(info.length)
        need[info.relative_path] = max(need.get(info.relative_path, 0), end)
    for name, size in sorted(need.items()):
        path = Path(shards) / name
        if Path(name).is_absolute() or ".." in Path(name).parts:
            raise CheckpointError(N_("{shards}/.metadata points outside the checkpoint ({name})"), shards=shards,
                                  name=name)
        if not path.exists():
            raise CheckpointError(N_("{path} is missing: the sharded checkpoint is incomplete"), path=path)
        if path.stat().st_size < size:
            raise CheckpointError(N_("{path} is truncated ({st_size} bytes, the metadata says {size}): the sharded "
                                     "checkpoint is damaged; use an earlier one"), path=path,
                                  st_size=path.stat().st_size, size=size)


def safe_reader_class() -> type:
    """FileSystemReader whose read_metadata uses the allow-list unpickler (a class made on first use: importing
    torch.distributed.checkpoint costs a second)."""
    from torch.distributed.checkpoint import FileSystemReader
    from torch.distributed.checkpoint.metadata import StorageMeta

    class SafeFileSystemReader(FileSystemReader):
        def read_metadata(self, *args: Any, **kwargs: Any):
            metadata = read_dcp_metadata(Path(self._get_metadata_path(kwargs.get("rank"))))
            if getattr(metadata, "storage_meta", None) is None:
                metadata.storage_meta = StorageMeta()
            metadata.storage_meta.load_id = self.load_id
            return metadata

    return SafeFileSystemReader


def safe_planner_class() -> type:
    """DefaultLoadPlanner whose non-tensor values (optimiser hyper-parameters) load with weights_only=True."""
    from torch.distributed.checkpoint.default_planner import DefaultLoadPlanner

    class SafeLoadPlanner(DefaultLoadPlanner):
        def load_bytes(self, read_item, value: io.BytesIO) -> None:
            try:
                safe = io.BytesIO(value.read())
                torch.load(safe, weights_only=True)  # refuses anything but plain values
            except Exception as e:
                why = str(e).strip().splitlines()[0][:200] if str(e).strip() else type(e).__name__
                raise UnsafeCheckpointError(N_("refusing to unpickle {fqn} of a sharded checkpoint: not a plain "
                                               "value ({why})"), fqn=read_item.dest_index.fqn, why=why) from None
            safe.seek(0)
            super().load_bytes(read_item, safe)

    return SafeLoadPlanner


def consolidate(run_dir: str | Path, step: int | None = None, out: str | Path | None = None,
                overwrite: bool = False) -> Path:
    """Merge the shards of a checkpoint (the latest, or `step`) into one model.safetensors that `load_run`,
    `translate` and `evaluate` read. Runs in one process without GPUs. Default output: beside the shards, which
    makes checkpoints/step-N/ a complete single-file checkpoint too; another `out` is checked by runs/folders.py."""
    from scratchformer.model import build_model

    run_dir = Path(run_dir)
    if out is not None:  # before any work: never a run's own file, an existing file only with --overwrite
        check_file(Path(out), "consolidate", overwrite)
    config = runs.load_config(run_dir)
    if step is None:
        found = runs.latest_checkpoint(run_dir)
        if found is None or not is_sharded_checkpoint(found):
            sharded = list_sharded_checkpoints(run_dir)
            found = sharded[-1] if sharded else None
    else:
        found = runs.checkpoint_dir(run_dir) / step_name(step)
    if found is None or not is_sharded_checkpoint(found):
        raise CheckpointError(N_("no sharded (FSDP) checkpoint {value}: consolidate reads checkpoints written by "
                                 "`train fsdp=true` under torchrun"),
                              value=found or 'in ' + str(runs.checkpoint_dir(run_dir)))
    model = build_model(config)
    load_sharded_state(model, None, found)
    target = Path(out) if out is not None else found / WEIGHTS  # beside the shards: the command's own file
    runs.save_weights(model, target)
    return target

"""How the model is spread over processes, behind one interface: Plain (one process) | DDP (a full copy per
rank, gradients all-reduced) | FSDP (each rank holds 1/world of every weight; training/fsdp.py).

    par = make_parallel(cfg, dist)
    wrapped = par.wrap(model)                 # what forward/backward run on; `model` stays the plain module
    with par.no_sync(wrapped, last): ...      # accumulation: all-reduce only on the last micro-batch
    par.save_checkpoint(...)                  # checkpoints/step-N (single file, or DCP shards)
    par.restore(found, state, ...)            # weights + optimiser from either kind of checkpoint
    par.save_weights(model, path)             # the best weights as one safetensors file
    with par.decoding(model): ...             # decoding calls submodules directly: FSDP gathers the root
"""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import torch
from torch import nn

from scratchformer.errors import N_, ConfigError
from scratchformer.runs import load_weights, save_weights
from scratchformer.runs.names import WEIGHTS
from scratchformer.training import checkpoint as ckpt
from scratchformer.training import distributed as dist_utils
from scratchformer.training.distributed import DistInfo


class Plain:
    """One process: nothing to wrap, rank 0 writes everything."""

    shard_validation = False  # each rank scores 1/world of the validation batches (DDP only)

    def __init__(self, info: DistInfo) -> None:
        self.info = info

    def check(self, dtype: str) -> None:
        """Refuse a combination that cannot work, before the model is built."""

    def wrap(self, model: nn.Module) -> nn.Module:
        return model

    def no_sync(self, wrapped: nn.Module, last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext()

    def save_checkpoint(self, run_dir: Path, step: int, model: nn.Module, wrapped: nn.Module,
                        optimizer: torch.optim.Optimizer, state: dict[str, Any], keep_last: int) -> None:
        """`state`: the trainer's counters and RNG; the optimiser's state is added here (rank 0 writes)."""
        if self.info.is_main:
            ckpt.save_checkpoint(run_dir, step, model, {**state, "optimizer": optimizer.state_dict()}, keep_last)
        dist_utils.barrier(self.info)

    def restore(self, found: Path, state: dict[str, Any], model: nn.Module, wrapped: nn.Module,
                optimizer: torch.optim.Optimizer) -> None:
        """Weights and optimiser from checkpoints/step-N: an FSDP checkpoint's shards load into any wrapper
        (DCP reshards), a single-file one into the plain module."""
        if state.get("sharded"):
            from scratchformer.training.fsdp import load_sharded_state  # torch.distributed.checkpoint: 1 s import

            load_sharded_state(wrapped, optimizer, found)
        else:
            load_weights(model, found / WEIGHTS)
            optimizer.load_state_dict(state["optimizer"])

    def save_weights(self, model: nn.Module, path: Path) -> None:
        if self.info.is_main:
            save_weights(model, path)

    @contextlib.contextmanager
    def decoding(self, model: nn.Module) -> Iterator[None]:
        yield


class DDP(Plain):
    """A full copy of the model per rank; DistributedDataParallel all-reduces the gradients."""

    shard_validation = True

    def wrap(self, model: nn.Module) -> nn.Module:
        ids = [self.info.device.index] if self.info.device.type == "cuda" else None
        return nn.parallel.DistributedDataParallel(model, device_ids=ids)

    def no_sync(self, wrapped: nn.Module, last: bool) -> contextlib.AbstractContextManager:
        return contextlib.nullcontext() if last or not hasattr(wrapped, "no_sync") else wrapped.no_sync()


class FSDP(Plain):
    """Fully sharded (FSDP2); every save and every gather is a collective that all ranks join."""

    def check(self, dtype: str) -> None:
        if dtype == "fp16":
            raise ConfigError(N_("fsdp=true with --dtype fp16 is not supported: the gradient scaler would check only "
                                 "this rank's shard for overflow; use --dtype bf16"))

    def wrap(self, model: nn.Module) -> nn.Module:
        from scratchformer.training import fsdp

        return fsdp.shard_model(model, self.info)

    def save_checkpoint(self, run_dir: Path, step: int, model: nn.Module, wrapped: nn.Module,
                        optimizer: torch.optim.Optimizer, state: dict[str, Any], keep_last: int) -> None:
        from scratchformer.training import fsdp

        fsdp.save_fsdp_checkpoint(run_dir, step, wrapped, optimizer, state, keep_last, self.info)

    def save_weights(self, model: nn.Module, path: Path) -> None:
        from scratchformer.training import fsdp

        fsdp.save_full_weights(model, path, self.info)

    @contextlib.contextmanager
    def decoding(self, model: nn.Module) -> Iterator[None]:
        from scratchformer.training import fsdp

        with fsdp.root_unsharded(model):
            yield


def make_parallel(fsdp: bool, info: DistInfo) -> Plain:
    """Plain for one process, FSDP with --fsdp under torchrun, DDP otherwise."""
    if not info.enabled:
        return Plain(info)
    return FSDP(info) if fsdp else DDP(info)

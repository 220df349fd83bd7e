"""PyTorch's own distributed engine, set up from torchrun's environment (RANK, WORLD_SIZE, LOCAL_RANK).

Backend: nccl on GPUs, gloo on CPUs, chosen automatically. With one process nothing is initialised.

Every collective (gradient all-reduce, barrier, FSDP gather) waits at most `timeout_s` for the other ranks
(default 120 s, or $SCRATCHFORMER_DIST_TIMEOUT seconds): a rank that died makes the others fail instead of
hanging, and torchrun then stops the job with a non-zero status; `train --resume` continues it.
"""

from __future__ import annotations

import datetime
import os
import warnings
from dataclasses import dataclass

import torch
import torch.distributed as dist

from scratchformer.errors import N_, ConfigError, ScratchformerWarning


@dataclass
class DistInfo:
    rank: int = 0
    world_size: int = 1
    local_rank: int = 0
    device: torch.device = torch.device("cpu")

    @property
    def is_main(self) -> bool:
        return self.rank == 0

    @property
    def enabled(self) -> bool:
        return self.world_size > 1


def pick_device(name: str, local_rank: int = 0) -> torch.device:
    if name == "auto":
        return torch.device(f"cuda:{local_rank}") if torch.cuda.is_available() else torch.device("cpu")
    device = torch.device(name)
    if device.type == "cuda" and not torch.cuda.is_available():
        raise ConfigError(N_("device={name!r} asked for but no CUDA GPU is available; use device=cpu"), name=name)
    return device


TIMEOUT_ENV = "SCRATCHFORMER_DIST_TIMEOUT"


def default_timeout_s() -> float:
    value = os.environ.get(TIMEOUT_ENV, "120")
    try:
        timeout = float(value)
    except ValueError:
        raise ConfigError(N_("${TIMEOUT_ENV}={value!r} is not a number of seconds"), TIMEOUT_ENV=TIMEOUT_ENV,
                          value=value) from None
    if timeout <= 0:
        raise ConfigError(N_("${TIMEOUT_ENV} must be positive, got {value}"), TIMEOUT_ENV=TIMEOUT_ENV, value=value)
    return timeout


def setup(device_name: str = "auto", timeout_s: float | None = None) -> DistInfo:
    """Initialise the process group when launched by torchrun; otherwise a single-process DistInfo."""
    world = int(os.environ.get("WORLD_SIZE", "1"))
    if world <= 1:
        return DistInfo(device=pick_device(device_name))
    rank, local_rank = int(os.environ["RANK"]), int(os.environ.get("LOCAL_RANK", "0"))
    local_world = int(os.environ.get("LOCAL_WORLD_SIZE", world))
    if device_name.startswith("cuda:") and local_world > 1:
        raise ConfigError(N_("device={device_name} would put all {local_world} ranks of this machine on one GPU; "
                             "use device=cuda (local rank r takes cuda:r)"), device_name=device_name,
                          local_world=local_world)
    device = pick_device(device_name, local_rank)
    if device.type == "cuda":
        n_gpus = torch.cuda.device_count()
        if local_world > n_gpus:
            raise ConfigError(N_("--nproc-per-node {local_world} is larger than the {n_gpus} GPU(s) on this "
                                 "machine; use --nproc-per-node {n_gpus} (or device=cpu for gloo on CPUs)"),
                              local_world=local_world, n_gpus=n_gpus)
        torch.cuda.set_device(device)
    elif local_rank == 0 and local_world > (os.cpu_count() or 1):
        # gloo has no per-device limit: more CPU ranks than cores run, but slower than fewer ranks would
        warnings.warn(ScratchformerWarning(N_("{local_world} CPU ranks on {cores} cores: ranks share cores and each "
                                              "step waits for the slowest; use --nproc-per-node <= the number of "
                                              "cores"), local_world=local_world, cores=os.cpu_count()), stacklevel=2)
    timeout_s = default_timeout_s() if timeout_s is None else timeout_s
    backend = "nccl" if device.type == "cuda" else "gloo"
    if not dist.is_initialized():
        timeout = datetime.timedelta(seconds=timeout_s)
        store = _attempt_store(rank, world, timeout)
        if store is None:
            dist.init_process_group(backend, timeout=timeout)
        else:
            dist.init_process_group(backend, store=store, rank=rank, world_size=world, timeout=timeout)
    return DistInfo(rank, world, local_rank, device)


def _attempt_store(rank: int, world: int, timeout: datetime.timedelta) -> dist.Store | None:
    """torchrun's key-value store, seen through a prefix unique to this attempt (TORCHELASTIC_RESTART_COUNT).

    After `torchrun --max-restarts N` restarts the workers, the store may still hold the previous attempt's
    addresses: a new rank can read a dead rank's gloo address and fail with 'connection refused' (seen here with
    torch 2.13; pytorch/pytorch#167288 reports it for NCCL). A prefix per attempt keeps attempts apart.
    None outside torchrun: init_process_group's own env:// rendezvous then applies."""
    attempt = os.environ.get("TORCHELASTIC_RESTART_COUNT")
    if attempt is None or "MASTER_ADDR" not in os.environ:
        return None
    agent_hosts_it = os.environ.get("TORCHELASTIC_USE_AGENT_STORE") == "True"
    store = dist.TCPStore(os.environ["MASTER_ADDR"], int(os.environ["MASTER_PORT"]), world,
                          is_master=not agent_hosts_it and rank == 0, timeout=timeout)
    return dist.PrefixStore(f"scratchformer/attempt-{attempt}", store)


def all_reduce_sum(value: float | int, info: DistInfo) -> float:
    if not info.enabled:
        return float(value)
    t = torch.tensor([float(value)], dtype=torch.float64, device=info.device if info.device.type == "cuda" else "cpu")
    dist.all_reduce(t)
    return float(t.item())


def barrier(info: DistInfo) -> None:
    if info.enabled:
        dist.barrier()


def cleanup(info: DistInfo) -> None:
    if info.enabled and dist.is_initialized():
        dist.destroy_process_group()

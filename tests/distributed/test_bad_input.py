"""What a user gets wrong when scaling out, and what they are told: more ranks than GPUs, one GPU for all ranks,
more CPU ranks than cores, a bad collective timeout, fp16 on a CPU; and bf16 autocast on a CPU, which works.
(A world-size change on resume is in test_ddp.py / test_fsdp.py; FSDP on an old torch in test_fsdp.py.)"""

import datetime
import json
import math

import pytest
import torch
import torch.distributed as dist

from scratchformer.cli import main
from scratchformer.errors import ConfigError
from scratchformer.training import distributed


def _as_rank(monkeypatch, rank: int, world: int, local_world: int | None = None) -> None:
    monkeypatch.setenv("RANK", str(rank))
    monkeypatch.setenv("LOCAL_RANK", str(rank))
    monkeypatch.setenv("WORLD_SIZE", str(world))
    monkeypatch.setenv("LOCAL_WORLD_SIZE", str(local_world or world))


def _fake_gpus(monkeypatch, n: int) -> None:
    monkeypatch.setattr(torch.cuda, "is_available", lambda: n > 0)
    monkeypatch.setattr(torch.cuda, "device_count", lambda: n)
    monkeypatch.setattr(torch.cuda, "set_device", lambda device: None)


def test_more_ranks_than_gpus_is_refused_before_any_connection(monkeypatch):
    _as_rank(monkeypatch, 0, 4)
    _fake_gpus(monkeypatch, 2)
    with pytest.raises(ConfigError, match=r"--nproc-per-node 4 is larger than the 2 GPU\(s\) on this machine; use "
                                          r"--nproc-per-node 2"):
        distributed.setup("cuda")


def test_one_named_gpu_for_several_ranks_is_refused(monkeypatch):
    _as_rank(monkeypatch, 0, 2)
    _fake_gpus(monkeypatch, 2)
    with pytest.raises(ConfigError, match="would put all 2 ranks of this machine on one GPU; use device=cuda"):
        distributed.setup("cuda:1")


def test_cpu_ranks_have_no_device_limit_but_more_than_cores_warns(monkeypatch):
    calls = []
    monkeypatch.setattr(dist, "is_initialized", lambda: False)
    monkeypatch.setattr(dist, "init_process_group", lambda backend, timeout: calls.append((backend, timeout)))
    monkeypatch.setattr("os.cpu_count", lambda: 2)
    monkeypatch.setenv(distributed.TIMEOUT_ENV, "7")
    _as_rank(monkeypatch, 0, 3)
    with pytest.warns(UserWarning, match="3 CPU ranks on 2 cores"):
        info = distributed.setup("cpu")
    assert (info.rank, info.world_size, info.device.type) == (0, 3, "cpu")
    assert calls == [("gloo", datetime.timedelta(seconds=7))]  # the timeout every collective waits at most


@pytest.mark.parametrize("value", ["soon", "0", "-3"])
def test_a_bad_timeout_is_explained(monkeypatch, value):
    monkeypatch.setenv(distributed.TIMEOUT_ENV, value)
    with pytest.raises(ConfigError, match=distributed.TIMEOUT_ENV):
        distributed.default_timeout_s()


def test_fp16_on_a_cpu_is_refused(launcher, tmp_path, capsys):
    assert main(launcher.train_args(tmp_path / "fp16", "--dtype", "fp16", "--quiet")) == 2
    assert "--dtype fp16 (autocast + gradient scaler) needs a CUDA GPU" in capsys.readouterr().err


def test_bf16_autocast_trains_on_a_cpu(runs, launcher, tmp_path, capsys):
    out = tmp_path / "bf16"
    assert main(launcher.train_args(out, "--dtype", "bf16", "max_tokens=96", "--max-steps", "2", "--quiet")) == 0
    records = [json.loads(x) for x in (out / "metrics.jsonl").read_text().splitlines() if x.strip()]
    losses = {r["step"]: r["loss"] for r in records if r["kind"] == "train"}
    assert sorted(losses) == [1, 2] and all(math.isfinite(v) for v in losses.values())
    # the same data and initial weights as the fp32 run: step 1's loss differs only by bf16 rounding
    fp32 = [json.loads(x) for x in (runs.one_process_2b / "metrics.jsonl").read_text().splitlines() if x.strip()]
    fp32_loss = next(r["loss"] for r in fp32 if r["kind"] == "train" and r["step"] == 1)
    assert losses[1] == pytest.approx(fp32_loss, rel=0.02)
    assert losses[1] != fp32_loss  # bf16 really was used


def test_each_torchrun_attempt_sees_its_own_keys(monkeypatch):
    """After a restart, a worker must not read the previous attempt's (dead) addresses from torchrun's store."""
    server = dist.TCPStore("127.0.0.1", 0, 1, is_master=True, timeout=datetime.timedelta(seconds=10))
    monkeypatch.setenv("MASTER_ADDR", "127.0.0.1")
    monkeypatch.setenv("MASTER_PORT", str(server.port))
    monkeypatch.setenv("TORCHELASTIC_USE_AGENT_STORE", "True")  # torchrun's agent hosts the store
    stores = []
    for attempt in ("0", "1"):
        monkeypatch.setenv("TORCHELASTIC_RESTART_COUNT", attempt)
        stores.append(distributed._attempt_store(0, 2, datetime.timedelta(seconds=10)))
        stores[-1].set("rank_1_address", f"address of attempt {attempt}")
    assert stores[1].get("rank_1_address") == b"address of attempt 1"
    assert server.get("scratchformer/attempt-0/rank_1_address") == b"address of attempt 0"
    monkeypatch.delenv("TORCHELASTIC_RESTART_COUNT")
    assert distributed._attempt_store(0, 2, datetime.timedelta(seconds=10)) is None  # not under torchrun

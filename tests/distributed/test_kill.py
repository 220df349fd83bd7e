"""One rank dies (SIGKILL) or hangs (SIGSTOP): torchrun ends the whole job with a non-zero status instead of
hanging, and `train --resume` under torchrun continues from the last checkpoint to the weights of an
uninterrupted run.

Why it ends: a dead peer closes its sockets, so the survivor's next gloo collective fails at once and torchrun,
seeing a failed worker (--max-restarts 0), stops the others (SIGTERM, then SIGKILL after its 30 s grace). A hung
peer keeps its sockets open: the survivor's collective fails after the process-group timeout
($SCRATCHFORMER_DIST_TIMEOUT), then torchrun stops the job the same way.

Worker pids come from /proc: torchrun's children, told apart by the RANK in their environment.
"""

import json
import os
import signal
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file


def _children(pid: int) -> list[int]:
    kids = []
    for entry in Path("/proc").iterdir():
        if not entry.name.isdigit():
            continue
        try:
            stat = (entry / "stat").read_text()
        except OSError:
            continue
        if int(stat.rsplit(")", 1)[1].split()[1]) == pid:  # field 4 of /proc/PID/stat: the parent's pid
            kids.append(int(entry.name))
    return kids


def _rank_pids(torchrun_pid: int, world: int, timeout: float = 30) -> dict[int, int]:
    deadline = time.time() + timeout
    while time.time() < deadline:
        ranks = {}
        for pid in _children(torchrun_pid):
            try:
                env = Path(f"/proc/{pid}/environ").read_bytes().split(b"\0")
            except OSError:
                continue
            for item in env:
                if item.startswith(b"RANK="):
                    ranks[int(item[5:])] = pid
        if len(ranks) == world:
            return ranks
        time.sleep(0.1)
    raise AssertionError(f"torchrun {torchrun_pid} did not start {world} workers")


def _latest_step(run: Path) -> int:
    latest = run / "checkpoints" / "latest"
    return int(latest.read_text().strip().split("-")[1]) if latest.exists() else 0


def _train_steps(run: Path) -> list[int]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return [r["step"] for r in records if r["kind"] == "train"]


def _interrupt_one_rank(launcher, run: Path, sig: signal.Signals, timeout_s: int, *extra: str,
                        torchrun_args: tuple[str, ...] = ()) -> tuple[int, float]:
    """Start 2 ranks, wait for the step-4 checkpoint, send `sig` to rank 1; (torchrun's status, seconds to exit)."""
    proc = launcher.start_torchrun(run, "--max-steps", "100000", "--quiet", *extra, torchrun_args=torchrun_args,
                                   SCRATCHFORMER_DIST_TIMEOUT=str(timeout_s))
    pids: dict[int, int] = {}
    try:
        deadline = time.time() + 120
        while _latest_step(run) < 4 and time.time() < deadline and proc.poll() is None:
            time.sleep(0.05)
        assert _latest_step(run) >= 4, f"no checkpoint written (torchrun status {proc.poll()})"
        pids = _rank_pids(proc.pid, 2)
        start = time.time()
        os.kill(pids[1], sig)
        proc.wait(timeout=timeout_s + 60)
        return proc.returncode, time.time() - start
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.wait()
        for pid in pids.values():  # a worker torchrun failed to end (e.g. still stopped): end it, it is ours
            try:
                if b"scratchformer" in Path(f"/proc/{pid}/cmdline").read_bytes():
                    os.kill(pid, signal.SIGKILL)
            except OSError:
                pass


@pytest.mark.parametrize("sig", [pytest.param(signal.SIGKILL, id="killed"),
                                 pytest.param(signal.SIGSTOP, id="hung", marks=pytest.mark.slow)])  # ~55 s
def test_losing_a_rank_ends_the_job_and_resume_finishes_it(launcher, tmp_path, sig):
    run = tmp_path / "run"
    timeout_s = 10
    # (--resume of a run that is not there is one line now, except under torchrun --max-restarts: the test below)
    status, seconds = _interrupt_one_rank(launcher, run, sig, timeout_s)
    assert status != 0
    # dead: the survivor's collective fails at once; hung: it waits out the timeout, then torchrun's 30 s grace
    assert seconds < (15 if sig == signal.SIGKILL else timeout_s + 30 + 15), seconds
    k = _latest_step(run)
    assert k >= 4

    total = k + 2
    launcher.torchrun(run, "--resume", "--max-steps", str(total), "--quiet")
    assert sorted(_train_steps(run)) == list(range(1, total + 1))  # steps after the checkpoint were forgotten

    # the reference is an uninterrupted run of the same world size: the same all-reduce order, so the only
    # possible difference is what the interruption lost (2 ranks vs 1 process is test_ddp's comparison)
    reference = tmp_path / "reference"
    launcher.torchrun(reference, "--max-steps", str(total), "--quiet")
    a = load_file(str(run / "checkpoints" / f"step-{total:08d}" / "model.safetensors"))
    b = load_file(str(reference / "checkpoints" / f"step-{total:08d}" / "model.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-5, rtol=0)


@pytest.mark.slow  # ~20 s, and the pieces are covered above
def test_torchrun_restarts_a_failed_job_that_resumes_itself(launcher, tmp_path):
    """`torchrun --max-restarts 1 ... train --resume`: the first launch finds no run and starts one; after a rank
    is killed, torchrun restarts every worker with the same command, and they continue from the checkpoint.
    (Without the per-attempt store prefix of distributed.setup, about half the restarts failed: 'connection
    refused' to the dead rank's old address.)"""
    run = tmp_path / "run"
    status, _ = _interrupt_one_rank(launcher, run, signal.SIGKILL, 20, "--resume", "--max-steps", "60",
                                    torchrun_args=("--max-restarts", "1"))
    assert status == 0
    assert sorted(_train_steps(run)) == list(range(1, 61))
    assert _latest_step(run) == 60

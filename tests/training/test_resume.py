"""Resume after SIGKILL: the resumed run loses only the steps since its last checkpoint and then follows
exactly the loss curve of an uninterrupted run with the same seed."""

import json
import os
import signal
import subprocess
import sys
import time
from pathlib import Path

import torch
from safetensors.torch import load_file

ARGS = ["--recipe", "toy", "save_every=10", "log_every=1", "eval_every=0", "bleu_samples=0",
        "--quiet", "--no-test"]


def _run(out: Path, *extra: str, wait: bool = True):
    cmd = [sys.executable, "-m", "scratchformer", "train", "--out", str(out), *ARGS, *extra]
    env = {**os.environ, "OMP_NUM_THREADS": "1"}
    if wait:
        subprocess.run(cmd, check=True, capture_output=True, env=env, timeout=300)
        return None
    return subprocess.Popen(cmd, stdout=subprocess.DEVNULL, stderr=subprocess.DEVNULL, env=env)


def _losses(run: Path) -> dict[int, float]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {r["step"]: r["loss"] for r in records if r["kind"] == "train"}


def test_sigkill_then_resume_matches_uninterrupted_run(tmp_path):
    killed = tmp_path / "killed"
    proc = _run(killed, "--max-steps", "100000", wait=False)
    latest = killed / "checkpoints" / "latest"
    deadline = time.time() + 240
    while time.time() < deadline and not (latest.exists() and latest.read_text().strip() >= "step-00000020"):
        time.sleep(0.02)
    proc.send_signal(signal.SIGKILL)  # no chance to clean up
    proc.wait()
    assert latest.exists(), "the run never wrote a checkpoint"
    k = int(latest.read_text().strip().split("-")[1])
    total = k + 15

    _run(killed, "--max-steps", str(total), "--resume")
    reference = tmp_path / "reference"
    _run(reference, "--max-steps", str(total))

    resumed, straight = _losses(killed), _losses(reference)
    assert sorted(resumed) == list(range(1, total + 1))  # nothing logged twice, nothing missing
    for step in range(1, total + 1):
        assert abs(resumed[step] - straight[step]) < 1e-6, (step, resumed[step], straight[step])
    a = load_file(str(killed / "checkpoints" / f"step-{total:08d}" / "model.safetensors"))
    b = load_file(str(reference / "checkpoints" / f"step-{total:08d}" / "model.safetensors"))
    for name in a:
        torch.testing.assert_close(a[name], b[name], atol=1e-6, rtol=0)

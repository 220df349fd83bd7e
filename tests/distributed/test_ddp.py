"""Data parallelism is only a way to compute the same update: 2 gloo ranks x batch b == 1 process x batch 2b
== 1 process x batch b x 2 accumulation steps, in float32 to 1e-5, checked on the weights each run saved.

How the three runs are made to see the same examples per update: see conftest.py.
"""

import json
import math
import shutil
from pathlib import Path

from safetensors.torch import load_file

STEPS = 4
TOL = 1e-5


def _weights(run: Path, step: int):
    return load_file(str(run / "checkpoints" / f"step-{step:08d}" / "model.safetensors"))


def _max_diff(a, b) -> float:
    assert a.keys() == b.keys(), sorted(set(a) ^ set(b))
    return max(float((a[k] - b[k]).abs().max()) for k in a)


def _train_losses(run: Path) -> dict[int, float]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {r["step"]: r["loss"] for r in records if r["kind"] == "train"}


def test_two_ranks_equal_one_process_with_double_batch_and_with_accumulation(runs):
    runs.start_torchrun_jobs()
    reference = runs.one_process_2b
    for other in (runs.ddp, runs.one_process_accum):
        for step in (2, STEPS):
            diff = _max_diff(_weights(reference, step), _weights(other, step))
            assert diff < TOL, (other.name, step, diff)
        ref_losses, losses = _train_losses(reference), _train_losses(other)
        assert sorted(losses) == list(range(1, STEPS + 1))
        for step, loss in ref_losses.items():
            assert math.isclose(loss, losses[step], rel_tol=TOL), (other.name, step, loss, losses[step])


def _valid_losses(run: Path) -> dict[int, float]:
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines() if x.strip()]
    return {r["step"]: r["valid_loss"] for r in records if r["kind"] == "valid"}


def test_ranks_share_validation_and_report_the_full_set(runs):
    """Each DDP rank scores half the validation batches; the summed figures equal one process scoring all."""
    runs.start_torchrun_jobs()
    ref, ddp = _valid_losses(runs.one_process_2b), _valid_losses(runs.ddp)
    assert sorted(ref) == sorted(ddp) == [2, 4]
    for step in ref:
        assert math.isclose(ref[step], ddp[step], rel_tol=TOL), (step, ref[step], ddp[step])


def test_the_comparison_can_fail(runs, launcher, tmp_path):
    """Half the examples per update (batch b, no accumulation) moves the weights far beyond the tolerance."""
    half = tmp_path / "half"
    launcher.single(half)
    assert _max_diff(_weights(runs.one_process_2b, STEPS), _weights(half, STEPS)) > 1000 * TOL


def test_only_rank_0_writes_and_reports(runs):
    run = runs.ddp
    summaries = [line for line in runs.output("ddp").stdout.splitlines() if line.startswith('{"run_dir"')]
    assert len(summaries) == 1, runs.output("ddp").stdout
    summary = json.loads(summaries[0])
    assert summary["step"] == STEPS and "is_main" not in summary
    state_steps = sorted(p.name for p in (run / "checkpoints").iterdir() if p.is_dir())
    assert state_steps == ["step-00000002", "step-00000004"]  # no temporary folders left by another rank


def test_resume_two_rank_checkpoint_in_one_process(runs, launcher):
    """World size 2 -> 1: weights and optimiser carry over, the epoch's batch order restarts (a note says so);
    with accum_steps=2 the update keeps its size, so the run ends where the 1-process run does."""
    run = runs.copy(runs.ddp, "ddp_then_one")
    shutil.rmtree(run / "checkpoints" / f"step-{STEPS:08d}")
    (run / "checkpoints" / "latest").write_text("step-00000002\n")
    proc = launcher.single(run, "--resume", "accum_steps=2")
    assert "checkpoint written with world size 2, resuming with 1" in proc.stdout + proc.stderr
    assert _max_diff(_weights(runs.one_process_2b, STEPS), _weights(run, STEPS)) < TOL
    assert sorted(_train_losses(run)) == list(range(1, STEPS + 1))

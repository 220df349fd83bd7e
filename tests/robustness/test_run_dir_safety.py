"""Run directories are safe to load, overwrite, share and resume: no code runs from a checkpoint, --overwrite
deletes only what training wrote, one training at a time holds a run, a damaged checkpoint falls back to an
intact one, a signal saves and exits 130/143, files get the umask's permissions, and write errors are one line."""

from __future__ import annotations

import contextlib
import io
import json
import os
import shutil
import signal
import subprocess
import sys
import time
from pathlib import Path

import pytest
import torch
from safetensors.torch import load_file, save_file

from scratchformer import ModelConfig, build_model, runs
from scratchformer.runs import files
from scratchformer.training import checkpoint as ckpt

from .conftest import SRC, TOY_TRAIN, assert_one_line_error, cli

STEP_6, STEP_12 = "step-00000006", "step-00000012"


class Payload:
    """Unpickling this runs code: it writes `marker` (what an attacker's checkpoint would do)."""

    def __init__(self, marker: Path) -> None:
        self.marker = str(marker)

    def __reduce__(self):
        return (exec, (f"open({self.marker!r}, 'w').write('pwned')",))


def _copy(toy_run: Path, tmp_path: Path, name: str = "run") -> Path:
    dest = tmp_path / name
    shutil.copytree(toy_run, dest)
    return dest


def _popen_train(out: Path, *extra: str) -> subprocess.Popen:
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}", "OMP_NUM_THREADS": "1"}
    cmd = [sys.executable, "-m", "scratchformer", "train", "--out", str(out), *extra]
    return subprocess.Popen(cmd, env=env, stdout=subprocess.PIPE, stderr=subprocess.PIPE)


def _wait_for(condition, proc: subprocess.Popen, timeout: float = 240) -> None:
    deadline = time.time() + timeout
    while time.time() < deadline and proc.poll() is None and not condition():
        time.sleep(0.05)
    assert condition(), f"the training never got there (status {proc.poll()})"


# -- 1. no pickle on load --------------------------------------------------------------------------------------

def test_a_planted_pickle_payload_in_trainer_state_never_runs(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    marker = tmp_path / "PWNED"
    latest = run / "checkpoints" / STEP_12
    for old in latest.glob("trainer_state.*"):
        old.unlink()
    torch.save({"step": 12, "payload": Payload(marker)}, latest / "trainer_state.pt")
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "--resume", "--out", str(run))
    assert not marker.exists(), "code from the checkpoint ran"
    assert_one_line_error(result, "refusing to unpickle", str(latest / "trainer_state.pt"), code=2)


def test_trainer_state_is_json_and_safetensors_and_restores_the_optimizer_exactly(toy_run):
    latest = toy_run / "checkpoints" / STEP_12
    assert sorted(p.name for p in latest.iterdir()) == ["model.safetensors", "trainer_state.json",
                                                        "trainer_state.safetensors"]
    for p in latest.iterdir():
        assert not p.read_bytes().startswith((b"\x80", b"PK")), f"{p} looks like a pickle / torch zip"
    skeleton = json.loads((latest / "trainer_state.json").read_text())
    tensors = load_file(str(latest / "trainer_state.safetensors"))
    assert skeleton["step"] == 12 and skeleton["world_size"] == 1
    state = ckpt.load_trainer_state(latest)
    model = build_model(ModelConfig.load(toy_run / "config.json"))
    from scratchformer.training.schedule import paper_optimizer

    optimizer = paper_optimizer(model.parameters())
    optimizer.load_state_dict(state["optimizer"])
    saved = optimizer.state_dict()
    assert saved["param_groups"][0]["betas"] == (0.9, 0.98)
    n_moments = 0
    for pid, moments in saved["state"].items():
        for name in ("exp_avg", "exp_avg_sq", "step"):
            assert torch.equal(moments[name], tensors[f"optimizer/state/{pid}/{name}"])  # the stored bytes
            n_moments += 1
    assert n_moments == 3 * len(list(model.parameters()))
    assert torch.equal(state["rng_cpu"], tensors["rng_cpu"]) and state["rng_cpu"].dtype == torch.uint8


def test_flatten_unflatten_round_trip():
    nested = {"a": [1, 2.5, None, True, "x", (0.9, 0.98)], "state": {0: {"t": torch.arange(3.0)}, 7: {}},
              "best": float("inf"), "neg": float("-inf"), "empty": {}, "rng": torch.ByteTensor([1, 2, 3])}
    skeleton, tensors = ckpt.flatten_state(nested)
    text = json.dumps(skeleton, allow_nan=False)  # strict JSON
    back = ckpt.unflatten_state(json.loads(text), tensors)
    assert back.keys() == nested.keys() and back["a"] == nested["a"] and back["best"] == float("inf")
    assert list(back["state"]) == [0, 7] and torch.equal(back["state"][0]["t"], torch.arange(3.0))
    assert back["neg"] == float("-inf") and torch.equal(back["rng"], nested["rng"]) and back["empty"] == {}
    with pytest.raises(TypeError, match="without pickle"):
        ckpt.flatten_state({"f": object()})


def _sharded_run(tmp_path: Path) -> Path:
    """A run directory whose step-2 checkpoint is a DCP (FSDP-style) checkpoint of a tiny model's weights."""
    import torch.distributed.checkpoint as dcp
    from torch.distributed.checkpoint.state_dict import get_model_state_dict

    from scratchformer.training import fsdp

    run = tmp_path / "sharded"
    config = ModelConfig.preset("tiny", d_model=32, d_ff=64, src_vocab_size=20, tgt_vocab_size=20)
    run.mkdir()
    config.save(run / "config.json")
    folder = run / "checkpoints" / "step-00000002"
    folder.mkdir(parents=True)
    import warnings

    with warnings.catch_warnings():
        warnings.simplefilter("ignore")
        dcp.save({"model": get_model_state_dict(build_model(config))}, checkpoint_id=str(folder / fsdp.SHARDS))
    ckpt.write_trainer_state(folder, {"step": 2, "sharded": True})
    return run


def test_consolidate_refuses_a_planted_dcp_metadata_payload(tmp_path):
    from scratchformer.training import fsdp

    run = _sharded_run(tmp_path)
    shards = run / "checkpoints" / "step-00000002" / fsdp.SHARDS
    assert fsdp.consolidate(run, out=tmp_path / "ok.safetensors").exists()  # the real metadata is allowed
    marker = tmp_path / "PWNED"
    import pickle

    (shards / ".metadata").write_bytes(pickle.dumps(Payload(marker)))
    with pytest.raises(runs.CheckpointError, match=r"refusing to unpickle .*\.metadata.*builtins\.exec"):
        fsdp.consolidate(run, out=tmp_path / "bad.safetensors")
    assert not marker.exists()


def test_consolidate_names_a_truncated_shard(tmp_path):
    from scratchformer.training import fsdp

    run = _sharded_run(tmp_path)
    shard = run / "checkpoints" / "step-00000002" / fsdp.SHARDS / "__0_0.distcp"
    shard.write_bytes(shard.read_bytes()[: shard.stat().st_size // 2])
    with pytest.raises(runs.CheckpointError, match=r"__0_0\.distcp is truncated") as e:
        fsdp.consolidate(run)
    assert "\n" not in str(e.value)


# -- 2. --overwrite deletes only what training wrote ------------------------------------------------------------

def test_overwrite_refuses_a_folder_train_did_not_make(tmp_path):
    user = tmp_path / "project"
    (user / "src").mkdir(parents=True)
    (user / "src" / "main.py").write_text("print('mine')\n")
    (user / "NOTES.md").write_text("notes\n")
    (user / "config.json").write_text("{}\n")
    result = cli("train", *TOY_TRAIN, "--out", str(user), "--overwrite")
    assert_one_line_error(result, "not made by scratchformer train", "delete it yourself", code=2)
    assert (user / "src" / "main.py").read_text() == "print('mine')\n" and (user / "NOTES.md").exists()
    assert (user / "config.json").read_text() == "{}\n"


def test_overwrite_refuses_the_current_directory(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    before = sorted(p.name for p in run.iterdir())
    result = cli("train", *TOY_TRAIN, "--out", ".", "--overwrite", cwd=run)
    assert_one_line_error(result, "current directory", code=2)
    assert sorted(p.name for p in run.iterdir()) == before


def test_overwrite_of_a_real_run_keeps_the_users_files(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    (run / "NOTES.md").write_text("my notes\n")
    (run / "checkpoints" / STEP_12 / "model.safetensors").write_bytes(b"junk")  # proves checkpoints/ is rewritten
    result = cli("train", *TOY_TRAIN, "--out", str(run), "--overwrite")
    assert result.code == 0, result.err[-2000:]
    assert (run / "NOTES.md").read_text() == "my notes\n"
    assert "kept NOTES.md" in result.err
    load_file(str(run / "checkpoints" / STEP_12 / "model.safetensors"))
    assert json.loads((run / runs.MARKER).read_text())["created_by"] == "scratchformer"


def test_export_overwrite_of_the_projects_folder_from_below_deletes_nothing(toy_run, tmp_path):
    """Issue 30: `cd proj/sub && scratchformer export RUN --format hf --out proj --overwrite` removed proj/notes.txt
    and proj/sub and exited 0; `--out ~` started deleting the home directory."""
    proj = tmp_path / "proj"
    (proj / "sub").mkdir(parents=True)
    (proj / "notes.txt").write_text("mine\n")
    home = tmp_path / "home"
    home.mkdir()
    (home / "keep.txt").write_text("mine\n")
    for out in (proj, home):
        result = cli("export", str(toy_run), "--format", "ctranslate2", "--out", str(out), "--overwrite",
                     cwd=proj / "sub", env={"HOME": str(home)})
        assert_one_line_error(result, code=2)
        assert (proj / "notes.txt").read_text() == "mine\n" and (proj / "sub").is_dir()
        assert (tmp_path / "home" / "keep.txt").read_text() == "mine\n"


# -- 3. one training per run directory ------------------------------------------------------------------------

def test_a_second_training_into_a_run_in_use_names_the_first_pid(tmp_path):
    run = tmp_path / "run"
    first = _popen_train(run, *TOY_TRAIN, "--max-steps", "100000", "save_every=100000")
    lock = run / runs.LOCK
    try:
        _wait_for(lambda: (lock.exists() and lock.read_text().strip()) or (run / "metrics.jsonl").exists(), first)
        assert lock.read_text().split()[0] == str(first.pid)
        second = cli("train", *TOY_TRAIN, "--out", str(run), "--resume")
        assert_one_line_error(second, f"in use by pid {first.pid}", "choose another --out", code=2)
    finally:
        first.kill()
        first.communicate()
    # the kernel dropped the dead holder's flock: the file left behind is not a lock
    again = cli("train", *TOY_TRAIN, "--max-steps", "2", "--out", str(run), "--resume")
    assert again.code == 0, again.err[-2000:]


# -- 5. resume after damage -----------------------------------------------------------------------------------

@pytest.mark.parametrize("broken", ["trainer_state", "model.safetensors"])
def test_resume_falls_back_from_a_truncated_latest_checkpoint_and_says_so(toy_run, tmp_path, broken):
    run = _copy(toy_run, tmp_path)
    for f in (run / "checkpoints" / STEP_12).glob(f"{broken}*"):
        f.write_bytes(f.read_bytes()[: f.stat().st_size // 2])
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "log_every=1", "--resume", "--out", str(run))
    assert result.code == 0, result.err[-2000:]
    assert f"checkpoint {STEP_12} is broken" in result.err and f"falling back to {STEP_6}" in result.err
    steps = [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()
             if json.loads(x)["kind"] == "train"]
    assert steps == [1, *range(7, 15)]  # resumed at step 6: what the run logged after it was forgotten


def test_resume_cleans_a_killed_save_and_drops_a_torn_metrics_line(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    partial = run / "checkpoints" / ".step-00000018.x1y2"
    partial.mkdir()
    (partial / "model.safetensors").write_bytes(b"half")
    with open(run / "metrics.jsonl", "a") as f:
        f.write('{"kind": "train", "step": 13, "lo')  # the process died mid-write
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "--resume", "--out", str(run))
    assert result.code == 0, result.err[-2000:]
    assert not partial.exists()
    assert "metrics.jsonl" in result.err and "torn last line" in result.err
    records = [json.loads(x) for x in (run / "metrics.jsonl").read_text().splitlines()]
    assert records[-1]["step"] == 14


def test_a_corrupt_metrics_line_in_the_middle_is_one_line(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    lines = (run / "metrics.jsonl").read_text().splitlines()
    lines[1] = "{not json"
    (run / "metrics.jsonl").write_text("\n".join(lines) + "\n")
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "--resume", "--out", str(run))
    assert_one_line_error(result, "metrics.jsonl", "line 2", code=2)


def test_a_fresh_run_never_appends_through_a_symlinked_metrics_file(tmp_path):
    run = tmp_path / "run"
    run.mkdir()
    victim = tmp_path / "victim.txt"
    victim.write_text("precious\n")
    (run / "metrics.jsonl").symlink_to(victim)
    result = cli("train", *TOY_TRAIN, "--max-steps", "2", "--out", str(run))  # not a folder train made (issue 42)
    assert_one_line_error(result, "not written by scratchformer train")
    assert victim.read_text() == "precious\n"
    (run / ".scratchformer-run").write_text('{"created_by": "scratchformer"}')  # one train made, then killed
    result = cli("train", *TOY_TRAIN, "--max-steps", "2", "--out", str(run), "--overwrite")
    assert result.code == 0, result.err[-2000:]
    assert victim.read_text() == "precious\n"
    assert not (run / "metrics.jsonl").is_symlink()
    assert [json.loads(x)["step"] for x in (run / "metrics.jsonl").read_text().splitlines()][0] == 1


# -- 6. signals ----------------------------------------------------------------------------------------------

@pytest.mark.parametrize("sig, status", [(signal.SIGINT, 130), (signal.SIGTERM, 143)])
def test_a_signal_saves_a_checkpoint_skips_the_test_report_and_exits_128_plus_signal(tmp_path, sig, status):
    run = tmp_path / "run"
    args = [a for a in TOY_TRAIN if a != "--no-test"]  # the test report would run after a normal end
    proc = _popen_train(run, *args, "--max-steps", "100000", "save_every=4", "--json")
    try:
        _wait_for(lambda: (run / "checkpoints" / "latest").exists(), proc)
        proc.send_signal(sig)
        out, err = proc.communicate(timeout=120)
    finally:
        if proc.poll() is None:
            proc.kill()
            proc.communicate()
    assert proc.returncode == status, err.decode()[-2000:]
    summary = [json.loads(line) for line in out.decode().splitlines() if line.startswith("{")]
    assert len(summary) == 1 and summary[0]["interrupted"] is True  # the summary, and no test-report JSON
    assert "split" not in summary[0]
    last = runs.latest_checkpoint(run)
    assert last is not None and int(last.name.split("-")[1]) == summary[0]["step"]  # saved where it stopped


# -- 7. permissions --------------------------------------------------------------------------------------------

def test_run_files_follow_the_umask(tmp_path):
    run = tmp_path / "run"
    old = os.umask(0o022)
    try:
        result = cli("train", *TOY_TRAIN, "--max-steps", "2", "save_every=2", "--out", str(run))
    finally:
        os.umask(old)
    assert result.code == 0, result.err[-2000:]
    for p in [run, *run.rglob("*")]:
        mode = p.stat().st_mode & 0o777
        assert mode == (0o755 if p.is_dir() else 0o644), (p, oct(mode))


# -- 9. output-directory errors --------------------------------------------------------------------------------

def test_out_that_is_a_file_is_one_line(tmp_path):
    target = tmp_path / "a-file"
    target.write_text("mine\n")
    assert_one_line_error(cli("train", *TOY_TRAIN, "--out", str(target)), "is a file", str(target), code=2)
    assert target.read_text() == "mine\n"


def test_an_unknown_corpus_fails_before_out_is_made_so_a_retry_needs_no_overwrite(tmp_path):
    out = tmp_path / "run"
    assert_one_line_error(cli("train", "--corpus", "no-such-corpus", "--out", str(out)), "no-such-corpus",
                          "not a bundled corpus", code=2)
    assert not out.exists()


def test_out_that_cannot_be_written_is_one_line(tmp_path):
    if os.geteuid() == 0:  # root ignores permission bits: a folder nobody may create one in
        target = Path("/sys/scratchformer-test-run")
    else:
        locked = tmp_path / "locked"
        locked.mkdir()
        locked.chmod(0o555)
        target = locked / "run"
    try:
        assert_one_line_error(cli("train", *TOY_TRAIN, "--out", str(target)), str(target), "cannot write", code=2)
    finally:
        if os.geteuid() != 0:
            (tmp_path / "locked").chmod(0o755)


def test_a_full_disk_during_a_save_is_one_line_and_keeps_the_previous_checkpoint(tmp_path, monkeypatch, capsys):
    from scratchformer.cli import main

    calls = []
    real_save = files.save_file

    def disk_fills_up(tensors, path, *args, **kwargs):
        calls.append(path)
        if len(calls) > 2:  # the step-6 checkpoint (model + trainer state) fits; nothing after it does
            raise OSError(28, "No space left on device")
        return real_save(tensors, path, *args, **kwargs)

    monkeypatch.setattr(files, "save_file", disk_fills_up)
    run = tmp_path / "run"
    threads = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        with contextlib.redirect_stdout(io.StringIO()):
            status = main(["train", *TOY_TRAIN, "--out", str(run)])
    finally:
        torch.set_num_threads(threads)
    err = [ln for ln in capsys.readouterr().err.splitlines() if ": error: " in ln]
    assert status == 2 and len(err) == 1, err
    assert "No space left on device" in err[0] and str(run) in err[0]
    step6 = run / "checkpoints" / STEP_6
    assert runs.latest_checkpoint(run) == step6
    assert ckpt.load_trainer_state(step6)["step"] == 6
    runs.load_weights(build_model(ModelConfig.load(run / "config.json")), step6 / "model.safetensors")
    assert [p.name for p in (run / "checkpoints").iterdir() if p.name.startswith(".")] == []


# -- 10. average -----------------------------------------------------------------------------------------------

def test_average_of_checkpoints_from_different_configs_names_both(toy_run, tmp_path):
    run = _copy(toy_run, tmp_path)
    config = ModelConfig.load(run / "config.json")
    other = build_model(config.replace(d_ff=config.d_ff * 2))
    save_file(runs.state_dict_for_saving(other), str(run / "checkpoints" / STEP_6 / "model.safetensors"))
    result = cli("average", str(run), "--last", "2")
    assert_one_line_error(result, STEP_6, STEP_12, "different configs", code=2)


@pytest.mark.parametrize("last", ["0", "-1"])
def test_average_last_must_be_positive(toy_run, tmp_path, last):
    out = tmp_path / "avg.safetensors"
    assert_one_line_error(cli("average", str(toy_run), "--last", last, "--out", str(out)), "--last", code=2)
    assert not out.exists()


def test_cleaning_a_killed_save_removes_only_the_trainers_temporary_names(tmp_path):
    (tmp_path / "checkpoints" / ".step-00000004.abc").mkdir(parents=True)
    (tmp_path / ".model.safetensors.k2j3.tmp").write_bytes(b"half")
    (tmp_path / ".my-notes.tmp").write_text("the user's\n")
    removed = runs.clean_partial_saves(tmp_path)
    assert sorted(p.name for p in removed) == [".model.safetensors.k2j3.tmp", ".step-00000004.abc"]
    assert (tmp_path / ".my-notes.tmp").exists()

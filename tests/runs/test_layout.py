"""The run directory's names (runs/layout.py, runs/metrics.py): where the weights are, what --overwrite may delete,
what a resumed run keeps of its log."""

import json

import pytest

from scratchformer import ModelConfig, build_model, runs
from scratchformer.runs.metrics import append_record, read_records, trim_records
from scratchformer.training import checkpoint as ckpt


def test_weights_path_falls_back_to_the_latest_checkpoint_then_says_train_first(tmp_path):
    with pytest.raises(runs.CheckpointError, match="train first"):
        runs.weights_path(tmp_path)
    model = build_model(ModelConfig.preset("tiny"))
    ckpt.save_checkpoint(tmp_path, 3, model, {"step": 3})
    assert runs.weights_path(tmp_path) == tmp_path / "checkpoints" / "step-00000003" / "model.safetensors"
    runs.save_weights(model, tmp_path / "model.safetensors")
    assert runs.weights_path(tmp_path) == tmp_path / "model.safetensors"


def test_clear_run_deletes_only_what_training_wrote(tmp_path, monkeypatch):
    run = tmp_path / "run"
    run.mkdir()
    (run / "notes.txt").write_text("mine")
    (run / "config.json").write_text("{}")
    with pytest.raises(runs.CheckpointError, match="not made by scratchformer train"):
        runs.clear_run(run)
    assert (run / "config.json").exists()
    runs.write_marker(run)
    (run / "checkpoints").mkdir()
    monkeypatch.chdir(tmp_path)
    assert runs.clear_run(run) == ["notes.txt"]
    assert sorted(p.name for p in run.iterdir()) == ["notes.txt"]
    monkeypatch.chdir(run)
    with pytest.raises(runs.CheckpointError, match="current directory"):
        runs.clear_run(run)


def test_trim_records_forgets_steps_after_the_checkpoint_and_a_torn_last_line(tmp_path):
    for step in (1, 2, 3, 4):
        append_record(tmp_path, {"kind": "train", "step": step})
    with open(tmp_path / "metrics.jsonl", "a") as f:
        f.write('{"kind": "tra')  # the process died while writing
    warnings = []
    trim_records(tmp_path, 2, lambda template, **fields: warnings.append(template.format(**fields)))
    assert [r["step"] for r in read_records(tmp_path)] == [1, 2]
    assert len(warnings) == 1 and "torn last line" in warnings[0]
    (tmp_path / "metrics.jsonl").write_text('{"step": 1}\nnot json\n' + json.dumps({"step": 2}) + "\n")
    with pytest.raises(runs.CheckpointError, match="line 2: not a JSON record"):
        trim_records(tmp_path, 5, warnings.append)

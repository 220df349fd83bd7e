"""Training checkpoints (training/checkpoint.py): step folders, `latest`, pruning, averaging."""

import os

import torch

from scratchformer import ModelConfig, build_model, runs
from scratchformer.training import checkpoint as ckpt


def test_checkpoint_dirs_pruned_and_latest_points_to_newest(tmp_path):
    model = build_model(ModelConfig.preset("tiny"))
    for step in (10, 20, 30, 40):
        ckpt.save_checkpoint(tmp_path, step, model, {"step": step}, keep_last=2)
    names = [p.name for p in runs.list_checkpoints(tmp_path)]
    assert names == ["step-00000030", "step-00000040"]
    assert runs.latest_checkpoint(tmp_path).name == "step-00000040"
    assert ckpt.load_trainer_state(runs.latest_checkpoint(tmp_path))["step"] == 40
    os.remove(tmp_path / "checkpoints" / "latest")  # a lost pointer falls back to the newest complete dir
    assert runs.latest_checkpoint(tmp_path).name == "step-00000040"


def test_average_checkpoints(tmp_path):
    a, b = build_model(ModelConfig.preset("tiny")), build_model(ModelConfig.preset("tiny"))
    ckpt.save_checkpoint(tmp_path, 1, a, {}, keep_last=5)
    ckpt.save_checkpoint(tmp_path, 2, b, {}, keep_last=5)
    avg = ckpt.average_checkpoints(runs.list_checkpoints(tmp_path))
    w = "encoder.layers.0.feed_forward.w_1.weight"
    torch.testing.assert_close(avg[w], (a.state_dict()[w] + b.state_dict()[w]) / 2)

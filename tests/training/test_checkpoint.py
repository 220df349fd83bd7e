"""Checkpoints: atomic writes, round trips, clear errors for wrong files, averaging."""

import os

import pytest
import torch

from scratchformer import ModelConfig, build_model, runs
from scratchformer.runs import files
from scratchformer.training import checkpoint as ckpt


def test_weights_round_trip_with_tied_embeddings(tmp_path):
    model = build_model(ModelConfig.preset("tiny", tie_embeddings=True))
    runs.save_weights(model, tmp_path / "m.safetensors")
    other = build_model(ModelConfig.preset("tiny", tie_embeddings=True))
    runs.load_weights(other, tmp_path / "m.safetensors")
    for (n, a), (_, b) in zip(model.state_dict().items(), other.state_dict().items()):
        assert torch.equal(a, b), n
    assert other.generator.proj.weight is other.tgt_embed.token.weight  # tying survives loading


def test_loading_another_config_names_the_tensor(tmp_path):
    runs.save_weights(build_model(ModelConfig.preset("tiny")), tmp_path / "m.safetensors")
    with pytest.raises(runs.CheckpointError, match="another config"):
        runs.load_weights(build_model(ModelConfig.preset("tiny", d_ff=256)), tmp_path / "m.safetensors")
    with pytest.raises(runs.CheckpointError, match="is missing"):
        runs.load_weights(build_model(ModelConfig.preset("tiny")), tmp_path / "nothing.safetensors")
    (tmp_path / "bad.safetensors").write_bytes(b"not a safetensors file")
    with pytest.raises(runs.CheckpointError, match="not a readable safetensors"):
        runs.load_weights(build_model(ModelConfig.preset("tiny")), tmp_path / "bad.safetensors")


def test_failed_write_leaves_the_previous_file_intact(tmp_path, monkeypatch):
    path = tmp_path / "m.safetensors"
    model = build_model(ModelConfig.preset("tiny"))
    runs.save_weights(model, path)
    before = path.read_bytes()

    def disk_full(*args, **kwargs):
        raise OSError(28, "No space left on device")

    monkeypatch.setattr(files, "save_file", disk_full)
    with pytest.raises(OSError, match="No space"):
        runs.save_weights(build_model(ModelConfig.preset("tiny")), path)
    assert path.read_bytes() == before
    assert [p.name for p in tmp_path.iterdir()] == ["m.safetensors"]  # no temporary file left behind


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

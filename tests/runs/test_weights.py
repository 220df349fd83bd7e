"""Weights <-> one safetensors file (runs/weights.py): round trips, tied weights, clear errors, atomic writes."""

import pytest
import torch

from scratchformer import ModelConfig, build_model, runs
from scratchformer.runs import files


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

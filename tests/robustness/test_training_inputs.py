"""Bad training inputs end in one line naming the flag, field or file: a loss that becomes nan, non-finite or
non-float weights, flags that --resume cannot change, and TrainConfig values of the wrong range or type."""

from __future__ import annotations

import json
import math
import os
import shutil

import pytest
import torch
from safetensors.torch import load_file, save_file

from scratchformer import ModelConfig, build_model, runs
from scratchformer.config import TrainConfig
from scratchformer.config.train import train_option
from scratchformer.errors import ConfigError

from .conftest import TOY_TRAIN, assert_one_line_error, cli

# -- 4. a loss that becomes nan ------------------------------------------------------------------------------

def test_a_diverging_run_stops_at_the_first_nan_and_saves_nothing_after_it(tmp_path):
    run = tmp_path / "run"
    result = cli("train", *TOY_TRAIN, "--max-steps", "60", "save_every=2", "log_every=1",
                 "lr_factor=1e6", "clip_norm=none", "--out", str(run))
    assert_one_line_error(result, "loss became nan at step", "the last finite checkpoint is step", "lr_factor=",
                          code=2)
    saved = runs.list_checkpoints(run)
    assert saved, "no checkpoint before the divergence: the test needs one"
    assert f"checkpoint is step {int(saved[-1].name.split('-')[1])}" in result.err
    for folder in saved:
        for name, t in load_file(str(folder / "model.safetensors")).items():
            assert bool(torch.isfinite(t).all()), (folder.name, name)
    if (run / "model.safetensors").exists():
        assert all(bool(torch.isfinite(t).all()) for t in load_file(str(run / "model.safetensors")).values())


def test_translate_with_nan_weights_is_one_line_naming_the_tensor(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    tensors = load_file(str(run / "model.safetensors"))
    name = sorted(tensors)[0]
    tensors[name] = torch.full_like(tensors[name], math.nan)
    save_file(tensors, str(run / "model.safetensors"))
    result = cli("translate", str(run), "hello")
    assert_one_line_error(result, "model.safetensors", name, "non-finite", code=2)


def test_load_weights_refuses_integer_tensors_where_floats_belong(tmp_path):
    model = build_model(ModelConfig.preset("tiny"))
    state = runs.state_dict_for_saving(model)
    name = next(n for n, t in state.items() if t.is_floating_point())
    state[name] = torch.zeros_like(state[name], dtype=torch.int32)
    save_file(state, str(tmp_path / "m.safetensors"))
    with pytest.raises(runs.CheckpointError, match=f"{name} is torch.int32, not a floating-point tensor"):
        runs.load_weights(build_model(ModelConfig.preset("tiny")), tmp_path / "m.safetensors")


# -- 5. --resume with changed flags -------------------------------------------------------------------------

def test_resume_applies_safe_flag_changes_and_says_which(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "keep_last=1", "--resume", "--out", str(run))
    assert result.code == 0, result.err[-2000:]
    assert "resume: max_steps 12 -> 14; keep_last 5 -> 1" in result.err
    saved = json.loads((run / "train_config.json").read_text())
    assert saved["max_steps"] == 14 and saved["keep_last"] == 1
    assert [p.name for p in runs.list_checkpoints(run)] == ["step-00000014"]  # keep_last took effect


@pytest.mark.parametrize("flags, needle", [(["seed=2"], "seed=2"), (["--preset", "demo"], "--preset 'demo'"),
                                           (["d_model=64"], "d_model=64"),
                                           (["max_sentence_len=64"], "max_sentence_len=64")])
def test_resume_refuses_flags_that_make_a_different_run(toy_run, tmp_path, flags, needle):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    result = cli("train", *TOY_TRAIN, "--max-steps", "14", "--resume", "--out", str(run), *flags)
    assert_one_line_error(result, needle, "different run", code=2)
    assert runs.latest_checkpoint(run).name == "step-00000012"  # nothing trained


# -- 8. TrainConfig validation ------------------------------------------------------------------------------

@pytest.mark.parametrize("flags, needles", [
    (["log_every=0"], ["log_every=0", ">= 1"]),
    (["eval_every=-1"], ["eval_every=-1"]),
    (["keep_last=0"], ["keep_last=0"]),
    (["lr_factor=nan"], ["lr_factor=nan"]),
    (["clip_norm=0"], ["clip_norm=0"]),
    (["device=foo"], ["device=foo", "cuda:N"]),
    (["time_limit=-5"], ["time_limit=-5"]),
    (["max_epochs=0"], ["max_epochs=0"]),
    (["bleu_samples=-1"], ["bleu_samples=-1"]),
    (["upsample=gimp"], ["upsample='gimp'", "SOURCE=N"]),
    (["upsample=gimp=2"], ["upsample", "several sources"]),  # the toy corpus has one source
])
def test_bad_flag_values_are_one_line_naming_the_flag(tmp_path, flags, needles):
    out = tmp_path / "run"
    assert_one_line_error(cli("train", *TOY_TRAIN, "--out", str(out), *flags), *needles, code=2)
    assert not out.exists()  # refused before anything was written


@pytest.mark.parametrize("content, needles", [
    ({"max_steps": "256"}, ["--max-steps", "'256'", "integer"]),
    ({"seed": None}, ["seed=None", "integer"]),
    ({"lr_factor": [1, 2]}, ["lr_factor=[1, 2]", "number"]),
    ({"shared_vocab": 1}, ["shared_vocab=1", "true or false"]),
    ([1, 2], ["--config", "list", "object"]),
])
def test_config_files_with_wrong_types_are_one_line(tmp_path, content, needles):
    path = tmp_path / "cfg.json"
    path.write_text(json.dumps(content))
    result = cli("train", "--config", str(path), "--out", str(tmp_path / "run"), "--quiet", "--no-test")
    assert_one_line_error(result, *needles, code=2)


def test_config_that_is_a_directory_is_one_line(tmp_path):
    result = cli("train", "--config", str(tmp_path), "--out", str(tmp_path / "run"))
    assert_one_line_error(result, "--config", "is a directory", code=2)


def test_a_saved_train_config_with_a_wrong_type_is_one_line_on_resume(toy_run, tmp_path):
    run = tmp_path / "run"
    shutil.copytree(toy_run, run)
    saved = json.loads((run / "train_config.json").read_text())
    (run / "train_config.json").write_text(json.dumps({**saved, "max_steps": "256"}))
    result = cli("train", "--resume", "--out", str(run), "--quiet", "--no-test")
    assert_one_line_error(result, "train_config.json", "max_steps", "'256'", code=2)


@pytest.mark.parametrize("field, value", [
    ("log_every", 0), ("save_every", -1), ("keep_last", 0), ("lr_factor", 0.0), ("lr_factor", math.inf),
    ("clip_norm", -1.0), ("clip_norm", math.nan), ("label_smoothing", math.nan), ("seed", 1.5), ("seed", True),
    ("warmup", 0), ("bleu_samples", -3), ("time_limit", 0.0), ("max_epochs", -1), ("device", "gpu"),
    ("device", "cuda:x"), ("max_steps", None), ("model", [1]), ("init", 3),
])
def test_train_config_rejects_each_bad_value_in_one_line(field, value):
    with pytest.raises(ConfigError) as e:
        TrainConfig(**{field: value})
    assert "\n" not in str(e.value) and train_option(field).rstrip("=") in str(e.value)  # --max-steps, warmup


def test_train_config_accepts_good_values():
    for kw in ({"lr_factor": 2}, {"clip_norm": None}, {"time_limit": 1}, {"device": "cuda:1"}, {"device": "mps"},
               {"max_epochs": None}, {"eval_every": 0, "save_every": 0}):
        config = TrainConfig(**kw)  # accepted, and kept as given (not silently replaced by a default)
        assert {k: getattr(config, k) for k in kw} == kw


def test_config_that_is_a_fifo_is_one_line_and_does_not_block(tmp_path):
    fifo = tmp_path / "cfg.json"
    os.mkfifo(fifo)  # reading it would wait for a writer for ever
    result = cli("train", "--config", str(fifo), "--out", str(tmp_path / "run"))
    assert_one_line_error(result, str(fifo), "FIFO", code=2)


def test_upsample_reaches_the_training_examples(toy_run, tmp_path):
    """--upsample gimp=3 on `software`: the task trains on the corpus plus two more copies of gimp's part."""
    from scratchformer.data.corpus import corpus_sources
    from scratchformer.training.distributed import DistInfo
    from scratchformer.training.tasks.translate import TranslationTask

    def examples(**kw) -> int:
        cfg = TrainConfig(corpus="software", init=str(toy_run), max_sentence_len=512, **kw)
        run = tmp_path / f"run{len(kw)}"
        run.mkdir()
        task = TranslationTask(cfg, run, DistInfo(), lambda _: None)
        task.setup(resume=False)
        return len(task.train_examples)

    gimp = dict(corpus_sources("software"))["gimp"]
    assert examples(upsample="gimp=3") == examples() + 2 * gimp

"""Two training options: --patience (stop when validation stops improving, resumable) and --dtype auto (bf16
autocast only where it is measured faster). No timing here: autotune gets a fake clock."""

import pytest
import torch

from scratchformer import autotune
from scratchformer.config import TrainConfig
from scratchformer.training import trainer as trainer_mod
from scratchformer.training.trainer import Trainer, train

TOY = dict(corpus="toy", preset="tiny", src_tokenizer="word", tgt_tokenizer="char", warmup=10, max_tokens=512,
           label_smoothing=0.0, save_every=0, bleu_samples=0, log_every=1, model={"dropout": 0.0})


def _scripted_validation(monkeypatch, losses):
    """Trainer.validate returns these validation losses in turn (then the last one again)."""
    seen = []

    def validate(self):
        value = losses[min(len(seen), len(losses) - 1)]
        seen.append(self.step)
        return {"valid_loss": value, "valid_nll": value, "valid_ppl": 1.0}

    monkeypatch.setattr(Trainer, "validate", validate)
    return seen


def test_patience_stops_after_n_evaluations_without_a_better_loss(monkeypatch, tmp_path):
    # evaluations at steps 2, 4, 6, 8: best at step 4, then two worse ones -> stop at step 8 (patience 2)
    seen = _scripted_validation(monkeypatch, [3.0, 2.0, 2.5, 2.6, 2.7, 2.8])
    summary = train(TrainConfig(**TOY, max_steps=50, eval_every=2, patience=2), tmp_path / "run", quiet=True)
    assert summary["step"] == 8 and seen == [2, 4, 6, 8]
    state = (tmp_path / "run" / "checkpoints" / "latest").read_text().strip()
    assert state == "step-00000008"


def test_patience_survives_a_resume(monkeypatch, tmp_path):
    run = tmp_path / "run"
    _scripted_validation(monkeypatch, [3.0, 2.0, 2.5])  # best at step 4; step 6 is worse
    train(TrainConfig(**TOY, max_steps=6, eval_every=2, patience=2), run, quiet=True)
    seen = _scripted_validation(monkeypatch, [2.6, 2.7])  # step 8 worse again: 8 - 4 >= 2 * 2 -> stop
    summary = train(TrainConfig(**TOY, max_steps=50, eval_every=2, patience=2), run, resume=True, quiet=True)
    assert summary["step"] == 8 and seen == [8]


def test_without_patience_training_runs_to_max_steps(monkeypatch, tmp_path):
    _scripted_validation(monkeypatch, [3.0, 4.0, 5.0, 6.0])
    summary = train(TrainConfig(**TOY, max_steps=8, eval_every=2), tmp_path / "run", quiet=True)
    assert summary["step"] == 8


@pytest.mark.parametrize("seconds, expected", [({"fp32": 1.0, "bf16": 0.5}, "bf16"),
                                               ({"fp32": 1.0, "bf16": 0.95}, "fp32"),  # within the margin
                                               ({"fp32": 1.0, "bf16": 2.0}, "fp32")])
def test_dtype_auto_takes_bf16_only_where_measured_faster(monkeypatch, tmp_path, seconds, expected):
    monkeypatch.setenv(autotune.ENV, "1")
    clock_calls = []

    def measure(name, work):
        clock_calls.append(name)
        work()  # the real FFN forward and backward run, in fp32 and under bf16 autocast
        return seconds[name]

    monkeypatch.setattr(autotune, "TUNER", autotune.Tuner(tmp_path / "cache.json", measure, busy=lambda: False))
    assert autotune.training_dtype(32, 64, torch.device("cpu"), rows=16) == expected
    assert set(clock_calls) == {"fp32", "bf16"}


def test_dtype_auto_trains_with_the_measured_choice(monkeypatch, tmp_path):
    monkeypatch.setattr(autotune, "training_dtype", lambda d_model, d_ff, device: "bf16")
    trainer = Trainer(TrainConfig(**TOY, max_steps=2, eval_every=0, dtype="auto"), tmp_path / "run", quiet=True)
    assert trainer.dtype == "fp32"  # before prepare(): nothing measured yet
    summary = trainer.train()
    assert trainer.dtype == "bf16" and summary["step"] == 2
    assert trainer_mod.DTYPES[trainer.dtype] is torch.bfloat16


def test_dtype_auto_with_autotune_off_is_fp32(monkeypatch):
    monkeypatch.setenv(autotune.ENV, "0")
    assert autotune.training_dtype(32, 64, torch.device("cpu"), rows=16) == "fp32"


def test_the_software_recipe_is_a_valid_config_on_a_bundled_corpus():
    from scratchformer.config import RECIPES
    from scratchformer.data.corpus import load_pairs

    cfg = TrainConfig.from_dict(RECIPES["software"])
    assert cfg.corpus == "software" and cfg.patience and cfg.dtype == "auto"
    assert len(load_pairs(cfg.corpus, "train")) > len(load_pairs("en-zh", "train"))

"""--init RUN for translation and language modelling (fine-tuning): the new run starts from RUN's weights, with
RUN's tokenizer files byte for byte and RUN's model config, and a fresh optimiser and schedule."""

import filecmp

import pytest
import torch

from scratchformer import runs
from scratchformer.config import TrainConfig
from scratchformer.errors import ConfigError
from scratchformer.training.trainer import Trainer, train

TOY = dict(corpus="toy", preset="tiny", src_tokenizer="word", tgt_tokenizer="char", warmup=10, max_tokens=512,
           label_smoothing=0.0, save_every=0, eval_every=0, bleu_samples=0, log_every=1, max_steps=4,
           model={"dropout": 0.0})


def _new_corpus(tmp_path):
    corpus = tmp_path / "domain.tsv"
    corpus.write_text("open the door\t开门\nclose the door\t关门\nopen the window\t开窗\n", encoding="utf-8")
    return str(corpus)


@pytest.mark.parametrize("task", ["translate", "lm"])
def test_init_starts_from_the_runs_weights_with_its_tokenizers_and_a_fresh_schedule(task, tmp_path):
    base = tmp_path / "base"
    extra = {} if task == "translate" else {"task": "lm", "preset": "gpt-tiny", "tgt_tokenizer": "char"}
    train(TrainConfig(**{**TOY, **extra}), base, quiet=True)
    tuned = Trainer(TrainConfig(**{**TOY, **extra, "corpus": _new_corpus(tmp_path), "init": str(base),
                                   "max_steps": 2}), tmp_path / "tuned", quiet=True)
    tuned.prepare()
    for name in ("tokenizer_src.json", "tokenizer_tgt.json"):
        if (base / name).exists():
            assert filecmp.cmp(base / name, tmp_path / "tuned" / name, shallow=False), name
    reference = type(tuned.model)(tuned.model_config)
    runs.load_weights(reference, runs.weights_path(base))
    for (n, a), (_, b) in zip(tuned.model.state_dict().items(), reference.state_dict().items()):
        assert torch.equal(a, b), n  # the same file loaded twice: exactly the same numbers
    assert tuned.step == 0 and tuned.optimizer.state == {}  # fresh optimiser: no Adam moments yet
    assert tuned.scheduler.last_epoch == 0 and tuned.model_config.extra["init"] == str(base)


def test_init_refuses_an_override_that_changes_the_model(tmp_path):
    base = tmp_path / "base"
    train(TrainConfig(**TOY), base, quiet=True)
    cfg = TrainConfig(**{**TOY, "init": str(base), "model": {"d_model": 32, "dropout": 0.0}})
    with pytest.raises(ConfigError, match=r"init=.*d_model=32 would change the model"):
        Trainer(cfg, tmp_path / "tuned", quiet=True).prepare()
    assert not (tmp_path / "tuned" / "tokenizer_tgt.json").exists()  # refused before anything was copied


def test_init_through_the_cli_trains(tmp_path, capsys):
    from scratchformer.cli import main

    base = tmp_path / "base"
    train(TrainConfig(**TOY), base, quiet=True)
    code = main(["train", f"init={base}", "--corpus", _new_corpus(tmp_path), "--preset", "tiny",
                 "--out", str(tmp_path / "tuned"), "--max-steps", "2", "--quiet", "--no-test", "bleu_samples=0",
                 "warmup=2", "max_tokens=512", "src_tokenizer=word", "tgt_tokenizer=char"])
    assert code == 0 and (tmp_path / "tuned" / "model.safetensors").exists()

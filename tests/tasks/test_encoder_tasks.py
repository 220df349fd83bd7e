"""Encoder tasks end to end: a tiny MLM pre-training, then a classifier started from it on a slice of the
bundled lo-module set, which must beat the majority-class baseline on held-out sentences."""

import json
import random

import pytest

from scratchformer.cli import main
from scratchformer.config import RECIPES, TrainConfig
from scratchformer.data.corpus import load_pairs
from scratchformer.data.masking import MASK
from scratchformer.errors import ConfigError
from scratchformer.evaluation.encoder import evaluate_encoder
from scratchformer.runs import load_run
from scratchformer.training.trainer import train as train_encoder_task

SMALL = {"d_model": 64, "n_heads": 4, "d_ff": 256, "n_encoder_layers": 2, "dropout": 0.0,
         "attention_dropout": 0.0, "max_positions": 32}
COMMON = dict(preset="bert-tiny", label_smoothing=0.0, eval_every=0, save_every=0, bleu_samples=0, max_sentence_len=32,
              log_every=1000)


@pytest.fixture(scope="module")
def slice_dir(tmp_path_factory):
    """1500 shuffled lo-module training sentences (labelled, and as plain text) and every other test one."""
    root = tmp_path_factory.mktemp("lo-module-slice")
    train = load_pairs("lo-module", "train")
    random.Random(0).shuffle(train)
    (root / "train.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in train[:1500]))
    (root / "text.txt").write_text("".join(f"{t}\n" for t, _ in train[:1500]))
    (root / "held_out.tsv").write_text("".join(f"{t}\t{y}\n" for t, y in load_pairs("lo-module", "test")[::2]))
    return root


def test_mlm_then_classify_beats_the_majority_baseline(slice_dir, tmp_path):
    mlm_cfg = TrainConfig(task="mlm", corpus=str(slice_dir / "text.txt"), tgt_tokenizer="bpe", tgt_vocab_size=1000,
                          max_steps=40, warmup=50, lr_factor=0.15, max_tokens=1024, model=SMALL, **COMMON)
    mlm = train_encoder_task(mlm_cfg, tmp_path / "mlm", quiet=True)
    assert mlm["step"] == 40 and 0 < mlm["valid_masked_accuracy"] < 1 and mlm["valid_mlm_ppl"] > 1
    run = load_run(tmp_path / "mlm")
    assert type(run.model).__name__ == "EncoderForMLM"
    assert run.model_config.mask_id == run.tgt_tok.token_to_id(MASK) == run.tgt_tok.vocab_size - 1

    cls_cfg = TrainConfig(task="classify", corpus=str(slice_dir / "train.tsv"), init=str(tmp_path / "mlm"),
                          max_steps=300, warmup=30, lr_factor=0.12, max_tokens=768, **COMMON)
    summary = train_encoder_task(cls_cfg, tmp_path / "cls", quiet=True)
    assert summary["step"] == 300 and summary["valid_accuracy"] > summary["valid_majority_accuracy"]
    cls = load_run(tmp_path / "cls")
    assert type(cls.model).__name__ == "EncoderForClassification"
    assert cls.model_config.labels == ["basic", "calc", "chart", "impress-draw", "math", "writer"]
    assert cls.model_config.extra["init"] == str(tmp_path / "mlm")
    assert (tmp_path / "cls" / "tokenizer_tgt.json").read_bytes() == (tmp_path / "mlm" / "tokenizer_tgt.json"
                                                                       ).read_bytes()
    final = [json.loads(x) for x in (tmp_path / "cls" / "metrics.jsonl").read_text().splitlines()][-1]
    assert final["kind"] == "final" and {"test_accuracy", "test_majority_accuracy"} <= set(final)

    held_out = evaluate_encoder(tmp_path / "cls", corpus=str(slice_dir / "held_out.tsv"))
    assert held_out["sentences"] == 292 and held_out["majority_class"] == "calc"
    assert held_out["accuracy"] > held_out["majority_accuracy"] + 0.05, held_out


def test_classify_init_must_be_an_encoder_run(lm_run, slice_dir, tmp_path):
    cfg = TrainConfig(task="classify", corpus=str(slice_dir / "train.tsv"), init=str(lm_run), max_steps=1, **COMMON)
    with pytest.raises(ConfigError, match="must be an encoder"):
        train_encoder_task(cfg, tmp_path / "cls", quiet=True)
    cfg = TrainConfig(task="mlm", corpus=str(slice_dir / "text.txt"), init=str(lm_run), max_steps=1, **COMMON)
    with pytest.raises(ConfigError, match="--resume"):
        train_encoder_task(cfg, tmp_path / "mlm", quiet=True)


def test_classify_needs_labels(tmp_path):
    (tmp_path / "one.tsv").write_text("a b\tx\nc d\tx\n")
    cfg = TrainConfig(task="classify", corpus=str(tmp_path / "one.tsv"), tgt_tokenizer="char", max_steps=1, **COMMON)
    with pytest.raises(ConfigError, match="2 or more labels"):
        train_encoder_task(cfg, tmp_path / "run", quiet=True)


def test_encoder_recipes_and_the_evaluate_command(slice_dir, tmp_path, capsys):
    for name in ("lm-demo", "mlm-demo", "classify-demo"):
        TrainConfig.from_dict(RECIPES[name])
    assert RECIPES["mlm-demo"]["text_side"] == "src" and RECIPES["classify-demo"]["corpus"] == "lo-module"
    argv = ["train", "--task", "classify", "--corpus", str(slice_dir / "train.tsv"), "--max-steps", "3",
            "tgt_tokenizer=char", "eval_every=0", "max_sentence_len=32", "--out", str(tmp_path / "run"),
            "--quiet", "--json", "d_model=16", "n_heads=2", "d_ff=16", "n_encoder_layers=1", "max_positions=32"]
    assert main(argv) == 0
    summary = json.loads(capsys.readouterr().out.splitlines()[-1])
    assert {"valid_accuracy", "test_accuracy", "test_majority_class"} <= set(summary)
    assert main(["evaluate", str(tmp_path / "run"), "--json"]) == 0
    result = json.loads(capsys.readouterr().out)
    assert result["majority_class"] == "calc" and 0 <= result["accuracy"] <= 1

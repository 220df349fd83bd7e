"""The model really learns: the seeds' overfit check and the classic copy task, end to end through the trainer."""

import json
import random

import pytest

from scratchformer.config import RECIPES, TrainConfig
from scratchformer.evaluation.translation import evaluate_run
from scratchformer.training.trainer import train


def test_overfit_the_seeds_toy_pairs(tmp_path):
    cfg = TrainConfig.from_dict({**RECIPES["toy"], "log_every": 1})
    train(cfg, tmp_path, quiet=True)
    records = [json.loads(x) for x in (tmp_path / "metrics.jsonl").read_text().splitlines()]
    losses = [r["loss"] for r in records if r["kind"] == "train"]
    assert losses[0] > 2.0 and losses[-1] < 0.05  # from chance to near zero
    result = evaluate_run(tmp_path, split="train", show=6)
    assert result["exact_match"] == 1.0, result["samples"]


def _copy_corpus(path, n, seed):
    rng = random.Random(seed)
    symbols = "abcdefghij"
    lines = []
    for _ in range(n):
        seq = " ".join(rng.choice(symbols) for _ in range(rng.randint(3, 8)))
        lines.append(f"{seq}\t{seq}")
    path.write_text("\n".join(lines) + "\n")
    return lines


@pytest.mark.slow  # ~66 s on 2 cores; the toy overfit above keeps learning in `make test` (make test-slow runs it)
def test_copy_task_reaches_near_full_exact_match_on_held_out_sequences(tmp_path):
    """Copying unseen sequences: at least 97 of 100 exactly right after 1000 steps.

    Not 100 of 100: the last few sequences flip with the kernels' rounding. Measured on an AMD EPYC at 600 / 800 /
    1000 / 1200 steps, in five settings (torch's own kernels at 1 and 2 threads; ATen avx2 + MKL AVX2 at 2; ATen
    default, and MKL SSE4_2, at 1): 0.96-1.0 / 0.95-1.0 / 1.0 / 0.99-1.0; the former bar (600 steps, 1.0, set on
    a Xeon) gave 0.96 there.
    """
    train_lines = set(_copy_corpus(tmp_path / "train.tsv", 6000, seed=1))
    held_out = [x for x in _copy_corpus(tmp_path / "held_out.tsv", 300, seed=2) if x not in train_lines][:100]
    (tmp_path / "held_out.tsv").write_text("\n".join(held_out) + "\n")
    # holdout none: all 6000 lines train, as when the bar was measured; the held-out file is scored explicitly
    cfg = TrainConfig(corpus=str(tmp_path / "train.tsv"), holdout="none", preset="tiny", src_tokenizer="word",
                      tgt_tokenizer="word", shared_vocab=True, max_steps=1000, warmup=100, lr_factor=1.0,
                      max_tokens=1024, label_smoothing=0.0, eval_every=0, bleu_samples=0, model={"dropout": 0.0})
    train(cfg, tmp_path / "run", quiet=True)
    result = evaluate_run(tmp_path / "run", corpus=str(tmp_path / "held_out.tsv"), show=3)
    assert result["sentences"] == len(held_out) >= 80
    assert result["exact_match"] >= 0.97, result["samples"]

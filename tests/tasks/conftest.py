"""Shared runs for the task tests: a tiny trained language model on a synthetic help-text corpus."""

import random

import pytest
import torch

from scratchformer.config import TrainConfig
from scratchformer.training.trainer import train

OBJECTS = ["table", "cell", "chart", "page", "slide", "frame", "field", "style", "macro", "formula"]
VERBS = ["Select", "Click", "Choose", "Open", "Delete", "Insert", "Move", "Copy"]
ENDS = ["in the dialog.", "on the toolbar.", "from the menu.", "in the document.", "to continue."]


def help_sentences(n: int, seed: int) -> list[str]:
    """Short imperative sentences from a small grammar: learnable in a few dozen steps."""
    rng = random.Random(seed)
    return [f"{rng.choice(VERBS)} the {rng.choice(OBJECTS)} {rng.choice(ENDS)}" for _ in range(n)]


@pytest.fixture(scope="session")
def lm_run(tmp_path_factory):
    """A decoder-only run (char tokenizer, 2 layers of width 32) trained 60 steps; max_len 48."""
    root = tmp_path_factory.mktemp("lm")
    corpus = root / "help.txt"
    corpus.write_text("\n".join(help_sentences(400, seed=0)) + "\n")
    cfg = TrainConfig(task="lm", corpus=str(corpus), preset="gpt-tiny", tgt_tokenizer="char", max_sentence_len=48,
                      max_tokens=1024, max_steps=60, warmup=20, lr_factor=0.5, label_smoothing=0.0, eval_every=0,
                      save_every=0, bleu_samples=0, seed=3,
                      model={"d_model": 32, "n_heads": 2, "d_ff": 64, "n_decoder_layers": 2, "dropout": 0.0,
                             "max_positions": 48})
    old = torch.get_num_threads()
    torch.set_num_threads(1)
    try:
        train(cfg, root / "run", quiet=True)
    finally:
        torch.set_num_threads(old)
    return root / "run"

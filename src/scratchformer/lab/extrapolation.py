"""Lab `extrapolation`: sinusoidal against learned positions beyond the training length (seed 003's Q7 and Q10).

The toy tagger learns `shift` (y_i = x_{i-1}: each position must find its left neighbour, a relative offset)
on sentences of at most TRAIN_LEN tokens, then is scored position by position on sentences twice as long.
Sinusoidal positions (model/embedding.py, `sinusoid_table`) are defined at every position, and PE(pos + k) is a
fixed linear map of PE(pos); a learned table (`LearnedPositionalEmbedding`) has rows past TRAIN_LEN that no
gradient ever reached: they keep their random initialisation. RoPE (model/rope.py) turns q and k by their
positions, so that q_i . k_j depends on i - j only. Each of these that config's `Positions` offers is tried.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any, get_args

import torch

from scratchformer.config.model import Positions
from scratchformer.i18n import _
from scratchformer.lab.common import (
    PAD,
    Result,
    Tagger,
    make_batch,
    pct,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)

SEED = 0
VOCAB, TRAIN_LEN = 16, 12
KINDS = [k for k in ("sinusoidal", "learned", "rope") if k in get_args(Positions)]


def train_and_score(kind: str, steps: int, test_len: int) -> dict[str, object]:
    """Train on lengths 2..TRAIN_LEN; accuracy per position on sentences of test_len tokens."""
    g = seed_all(SEED)
    rng = random.Random(SEED)
    model = Tagger(tagger_config(vocab=VOCAB, positions=kind))
    log = train_tagger(model, lambda step: make_batch("shift", 64, [rng.randint(2, TRAIN_LEN) for _ in range(64)],
                                                      VOCAB, g), steps, lr=3e-3, warmup=30)
    ids, targets = make_batch("shift", 512, test_len, VOCAB, g)
    with torch.no_grad():
        right = (model(ids).argmax(-1) == targets) & (targets != PAD)  # (N, L)
    per_position = right.float().mean(0).tolist()
    inside = sum(per_position[1:TRAIN_LEN]) / (TRAIN_LEN - 1)  # position 0 (y = x) is trivial: left out
    beyond = sum(per_position[TRAIN_LEN:]) / (test_len - TRAIN_LEN)
    return {"final_loss": log.final, "per_position": per_position, "inside": inside, "beyond": beyond}


def run(out: Path, quick: bool = False) -> Result:
    """Each kind of positions; one panel of accuracy against position."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps, test_len = (200, 2 * TRAIN_LEN) if quick else (600, 3 * TRAIN_LEN)
    runs = {kind: train_and_score(kind, steps, test_len) for kind in KINDS}
    fig, ax = plt.subplots(figsize=(9, 4.2))
    for kind, r in runs.items():
        ax.plot(range(test_len), r["per_position"], "-o", ms=3,
                label=_("{kind}: {inside} inside, {beyond} beyond").format(kind=kind, inside=pct(r["inside"]),
                                                                          beyond=pct(r["beyond"])))
    ax.axvspan(TRAIN_LEN - 0.5, test_len - 0.5, color="gray", alpha=0.15, label=_("positions never trained"))
    ax.axhline(1 / (VOCAB - 3), color="gray", ls=":", label=_("chance"))
    ax.set(xlabel=_("position"), ylabel=_("accuracy (y_i = x_(i-1))"), ylim=(0, 1.05),
           title=_("`shift`, trained on lengths 2-{train_len}, {steps} steps, tested on length {test_len}").format(
               train_len=TRAIN_LEN, steps=steps, test_len=test_len))
    ax.legend(fontsize=8)
    fig.tight_layout()
    figure = save_figure(fig, out, "extrapolation")
    numbers = {"kinds": KINDS, "train_len": TRAIN_LEN, "test_len": test_len, "steps": steps, "runs": runs}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    runs = numbers["runs"]
    best = max(runs, key=lambda k: runs[k]["beyond"])
    return (
        _("Accuracy inside the training length / beyond it: {rows}. Best beyond the training length: {best}").format(
            rows="; ".join(f"{k} {pct(r['inside'])} / {pct(r['beyond'])}" for k, r in runs.items()), best=best)
        + (_(", {lead} ahead of the worst.").format(
            lead=pct(runs[best]["beyond"] - min(r["beyond"] for r in runs.values()))) if len(runs) > 1 else ".")
        + (_(" The learned table's rows past the training length were never trained: {acc} there.").format(
            acc=pct(runs["learned"]["beyond"])) if "learned" in runs else ""))

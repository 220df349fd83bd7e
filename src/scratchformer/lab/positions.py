"""Lab `positions`: without positional encoding, self-attention cannot see order (seed 003's [3, 8, 4] vs [8, 3, 4]).

Part 1, exact: an encoder whose sinusoid table is zeroed maps a permuted input to the permuted output, to float
precision; with the table the outputs differ. Part 2, learned: the toy tagger trained on `copy` (needs no order)
and `reverse` (needs it), with and without positions.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch

from scratchformer.i18n import _
from scratchformer.lab.common import (
    Result,
    Tagger,
    evaluate_tagger,
    make_batch,
    pct,
    remove_positions,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)

SEED = 0


def permutation_gap(with_positions: bool) -> dict[str, float]:
    """Encode [3, 8, 4] and [8, 3, 4]; max |out([8,3,4]) - permuted out([3,8,4])| and the gap of the sums."""
    seed_all(SEED)
    model = Tagger(tagger_config()).eval()
    if not with_positions:
        remove_positions(model)
    a, b = torch.tensor([[3, 8, 4]]), torch.tensor([[8, 3, 4]])  # b is a with positions 0 and 1 swapped
    with torch.no_grad():
        ha, hb = model.encoder(a)[0], model.encoder(b)[0]  # (3, D) each
    swapped = ha[[1, 0, 2]]  # a's outputs in b's order
    return {"max_abs_gap": float((hb - swapped).abs().max()), "sum_gap": float((hb.sum(0) - ha.sum(0)).abs().max()),
            "scale": float(ha.abs().max())}


def train_accuracy(task: str, with_positions: bool, steps: int, length: int) -> float:
    """Held-out accuracy of the tagger trained `steps` steps on `task`."""
    g = seed_all(SEED)
    model = Tagger(tagger_config())
    if not with_positions:
        remove_positions(model)
    train_tagger(model, lambda step: make_batch(task, 64, length, 16, g), steps, lr=3e-3, warmup=30)
    ids, targets = make_batch(task, 512, length, 16, g)
    return evaluate_tagger(model, ids, targets)


def run(out: Path, quick: bool = False) -> Result:
    """Both parts; the picture: the permutation gaps (log scale) and the four accuracies."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps, length = (150, 6) if quick else (400, 8)
    gaps = {"with PE": permutation_gap(True), "without PE": permutation_gap(False)}
    acc = {f"{task}, {'with' if pe else 'without'} PE": train_accuracy(task, pe, steps, length)
           for task in ("copy", "reverse") for pe in (True, False)}
    chance = 1 / (16 - 3)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(11, 4))
    ax1.bar(list(gaps), [max(g["max_abs_gap"], 1e-12) for g in gaps.values()], color=["tab:blue", "tab:orange"])
    ax1.set(yscale="log", ylabel="max |f([8,3,4]) - swap(f([3,8,4]))|",
            title=_("permuting the input permutes the output?"))
    ax2.bar(list(acc), list(acc.values()), color=["tab:blue", "tab:orange"] * 2)
    ax2.axhline(chance, color="gray", ls="--", label=_("chance {chance}").format(chance=pct(chance)))
    ax2.set(ylim=(0, 1.05), ylabel=_("held-out accuracy"),
            title=_("toy tagger, {steps} steps, length {length}").format(steps=steps, length=length))
    ax2.tick_params(axis="x", labelrotation=20)
    ax2.legend()
    fig.tight_layout()
    figure = save_figure(fig, out, "positions")
    numbers = {"steps": steps, "length": length, "permutation": gaps, "accuracy": acc, "chance": chance}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    gaps, acc, chance = numbers["permutation"], numbers["accuracy"], numbers["chance"]
    no, yes = gaps["without PE"], gaps["with PE"]
    equivariant = no["max_abs_gap"] < 1e-4 * max(no["scale"], 1.0)
    rev_no, rev_yes = acc["reverse, without PE"], acc["reverse, with PE"]
    return _(
        "Without positional encoding, f([8,3,4]) equals f([3,8,4]) with rows swapped {exact} ({verdict}); with PE "
        "the gap is {gap:.2f}. Copy needs no order: {copy_no} without PE, {copy_yes} with. Reverse needs it: "
        "{rev_no} without PE against {rev_yes} with ({gain}; chance {chance})."
    ).format(exact=_("exactly") if no["max_abs_gap"] == 0 else _("to {gap:.1e}").format(gap=no["max_abs_gap"]),
             verdict=_("attention is blind to order") if equivariant else _("NOT equivariant"),
             gap=yes["max_abs_gap"], copy_no=pct(acc["copy, without PE"]), copy_yes=pct(acc["copy, with PE"]),
             rev_no=pct(rev_no), rev_yes=pct(rev_yes), chance=pct(chance),
             gain=_("PE wins by {d}").format(d=pct(rev_yes - rev_no)) if rev_yes > rev_no else _("no gain from PE"))

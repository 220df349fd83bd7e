"""Lab `norm-placement`: post-norm (the paper) against pre-norm as the stack grows, with and without warm-up
(seed 003's Q4: "Pre-Norm trains more stably").

    post: x <- LayerNorm(x + F(x))      every path from the loss to layer 1 crosses N LayerNorms
    pre:  x <- x + F(LayerNorm(x))      an identity path from the loss to every layer (+ a final LayerNorm)

Both are `ModelConfig.norm` (model/norm.py, SublayerConnection). The toy tagger learns `reverse` at depths 2, 6
and 12 with the same, rather high, learning rate, once with a linear warm-up and once without; a run whose loss
stays at chance level (ln of the number of tokens) has failed to train.
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

from scratchformer.i18n import _
from scratchformer.lab import common
from scratchformer.lab.common import FIRST_ID, Result, Tagger, evaluate_tagger, make_batch, placement, train_tagger

SEED = 0
VOCAB, LR = 16, 1e-2


def train_run(norm: str, layers: int, warmup: int, steps: int) -> dict[str, object]:
    g = common.seed_all(SEED)
    model = Tagger(common.tagger_config(vocab=VOCAB, d_model=32, n_heads=2, layers=layers, **placement(norm)))
    log = train_tagger(model, lambda step: make_batch("reverse", 32, 8, VOCAB, g), steps, lr=LR, warmup=warmup,
                       clip=None)
    ids, targets = make_batch("reverse", 512, 8, VOCAB, g)
    return {"curve": log.losses, "final_loss": log.final, "diverged": log.diverged,
            "accuracy": evaluate_tagger(model, ids, targets)}


def run(out: Path, quick: bool = False) -> Result:
    """Every (norm, depth, warm-up) run; panels: accuracy per depth, and the curves of the deepest stack."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    depths, steps, warm = ((6,), 150, 75) if quick else ((2, 6, 12), 200, 100)
    configs = [("post", 0), ("post", warm), ("pre", 0)] if quick else [("post", 0), ("post", warm), ("pre", 0),
                                                                        ("pre", warm)]
    runs = {f"{norm}, N={n}, warm-up {w}": train_run(norm, n, w, steps) for n in depths for norm, w in configs}
    chance_loss = math.log(VOCAB - FIRST_ID)
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2))
    for norm, w in configs:
        ax1.plot(depths, [runs[f"{norm}, N={n}, warm-up {w}"]["accuracy"] for n in depths], "-o" if norm == "pre"
                 else "--s", label=f"{norm}-norm, warm-up {w}")
    ax1.axhline(1 / (VOCAB - FIRST_ID), color="gray", ls=":", label=_("chance"))
    ax1.set(xlabel=_("layers N"), ylabel=_("held-out accuracy"), ylim=(0, 1.05), xticks=list(depths),
            title=_("tagger on `reverse`, lr {lr}, {steps} steps").format(lr=LR, steps=steps))
    ax1.legend()
    deep = depths[-1]
    for norm, w in configs:
        ax2.plot(runs[f"{norm}, N={deep}, warm-up {w}"]["curve"], label=f"{norm}-norm, warm-up {w}")
    ax2.axhline(chance_loss, color="gray", ls=":", label=_("chance: ln {n}").format(n=VOCAB - FIRST_ID))
    ax2.set(xlabel=_("step"), ylabel=_("training loss"), yscale="log", title=f"N={deep}")
    ax2.legend()
    fig.tight_layout()
    figure = common.save_figure(fig, out, "norm-placement")
    fails = failed_runs(runs, chance_loss)
    numbers = {"lr": LR, "steps": steps, "depths": list(depths), "chance_loss": chance_loss,
               "runs": {k: {key: v for key, v in r.items() if key != "curve"} for k, r in runs.items()},
               "failed": fails}
    return Result(numbers, conclude(numbers), figure)


def failed_runs(runs: dict[str, dict[str, Any]], chance_loss: float) -> list[str]:
    """The runs that did not train: diverged, or a final loss above 0.8 x chance."""
    return [name for name, r in runs.items() if r["diverged"] or r["final_loss"] > 0.8 * chance_loss]


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    runs, depths, chance_loss, fails = numbers["runs"], numbers["depths"], numbers["chance_loss"], numbers["failed"]
    deep = depths[-1]
    warm = max(int(name.rsplit(" ", 1)[1]) for name in runs)  # the warm-up steps of the warmed runs
    first_post = next((n for n in depths if f"post, N={n}, warm-up 0" in fails), None)
    acc = {name: r["accuracy"] for name, r in runs.items()}
    post = (_("first fails at N={n} (loss {loss:.2f}, chance {chance:.2f})").format(
        n=first_post, loss=runs[f"post, N={first_post}, warm-up 0"]["final_loss"], chance=chance_loss)
        if first_post else _("trains at every depth tried"))
    return _(
        "With lr {lr}: post-norm without warm-up {post}; at N={deep}: post-norm {post_0} without warm-up and "
        "{post_w} with {warm} warm-up steps, pre-norm {pre_0} without. Runs that did not train: {fails}."
    ).format(lr=numbers["lr"], post=post, deep=deep, post_0=common.pct(acc[f"post, N={deep}, warm-up 0"]),
             post_w=common.pct(acc[f"post, N={deep}, warm-up {warm}"]), warm=warm,
             pre_0=common.pct(acc[f"pre, N={deep}, warm-up 0"]),
             fails="; ".join(fails) if fails else _("none"))

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

from scratchformer.lab.common import (
    FIRST_ID,
    Result,
    Tagger,
    evaluate_tagger,
    make_batch,
    pct,
    placement,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)

SEED = 0
VOCAB, LR = 16, 1e-2


def train_run(norm: str, layers: int, warmup: int, steps: int) -> dict[str, object]:
    g = seed_all(SEED)
    model = Tagger(tagger_config(vocab=VOCAB, d_model=32, n_heads=2, layers=layers, **placement(norm)))
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
    ax1.axhline(1 / (VOCAB - FIRST_ID), color="gray", ls=":", label="chance")
    ax1.set(xlabel="layers N", ylabel="held-out accuracy", ylim=(0, 1.05), xticks=list(depths),
            title=f"tagger on `reverse`, lr {LR}, {steps} steps")
    ax1.legend()
    deep = depths[-1]
    for norm, w in configs:
        ax2.plot(runs[f"{norm}, N={deep}, warm-up {w}"]["curve"], label=f"{norm}-norm, warm-up {w}")
    ax2.axhline(chance_loss, color="gray", ls=":", label=f"chance: ln {VOCAB - FIRST_ID}")
    ax2.set(xlabel="step", ylabel="training loss", yscale="log", title=f"N={deep}")
    ax2.legend()
    fig.tight_layout()
    figure = save_figure(fig, out, "norm-placement")

    def failed(r: dict) -> bool:
        return r["diverged"] or r["final_loss"] > 0.8 * chance_loss

    fails = [name for name, r in runs.items() if failed(r)]
    first_post = next((n for n in depths if failed(runs[f"post, N={n}, warm-up 0"])), None)
    acc = {name: r["accuracy"] for name, r in runs.items()}
    conclusion = (
        f"With lr {LR}: post-norm without warm-up "
        + (f"first fails at N={first_post} (loss {runs[f'post, N={first_post}, warm-up 0']['final_loss']:.2f}, "
           f"chance {chance_loss:.2f})" if first_post else "trains at every depth tried")
        + f"; at N={deep}: post-norm {pct(acc[f'post, N={deep}, warm-up 0'])} without warm-up and "
        f"{pct(acc[f'post, N={deep}, warm-up {warm}'])} with {warm} warm-up steps, pre-norm "
        f"{pct(acc[f'pre, N={deep}, warm-up 0'])} without. Runs that did not train: "
        + ("; ".join(fails) if fails else "none") + ".")
    numbers = {"lr": LR, "steps": steps, "depths": list(depths), "chance_loss": chance_loss,
               "runs": {k: {key: v for key, v in r.items() if key != "curve"} for k, r in runs.items()},
               "failed": fails}
    return Result(numbers, conclusion, figure)

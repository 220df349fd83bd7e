"""Lab `add-and-norm`: the seeds' own code for Add & Norm, set beside the paper's (seed 001: the order "affects
training stability"; it calls the paper's LayerNorm(x + Sublayer(x)) "not Post-Norm", but that is post-norm).

    post     Norm(x + Dropout(F(x)))     the paper, section 3.1: "LayerNorm(x + Sublayer(x))"
    pre      x + Dropout(F(Norm(x)))     GPT-2 and most models since
    seed000  x + Dropout(Norm(F(x)))     seed 000's SublayerConnection (its comment says the paper's formula)
    seed003  x + Norm(F(x))              seed 003's EncoderLayer (`x = x + self.norm1(attn_out)`)

All four are `ModelConfig.norm_placement` values (model/norm.py, SublayerConnection.forward). Neither seed's
formula is the paper's: both add a *normalised* F(x) to an un-normalised x, so every sublayer adds a vector of
RMS about 1 to the residual stream and nothing ever shrinks it. Measured: the RMS of the stream after each
sublayer of an untrained stack, and a short training run of the toy tagger with each placement.
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
    placement,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)
from scratchformer.model.norm import PLACEMENTS, SublayerConnection

SEED = 0
FORMULAS = {"post": "Norm(x + Dropout(F(x)))", "pre": "x + Dropout(F(Norm(x)))",
            "seed000": "x + Dropout(Norm(F(x)))", "seed003": "x + Norm(F(x))"}


def build(name: str, **fields) -> Tagger:
    """The tagger with norm placement `name` (seed000's encoder ends with a norm, as seed 000's Encoder does)."""
    return Tagger(tagger_config(**fields, **placement(name)))


def stream_rms(name: str, layers: int) -> list[float]:
    """RMS of the residual stream after each sublayer of an untrained encoder (embeddings first)."""
    g = seed_all(SEED)
    model = build(name, layers=layers).eval()
    ids, _ = make_batch("reverse", 64, 8, 16, g)
    rms: list[float] = []

    def hook(_module, _args, out) -> None:
        rms.append(float(out.pow(2).mean().sqrt()))

    handles = [m.register_forward_hook(hook) for m in model.modules() if isinstance(m, SublayerConnection)]
    try:
        with torch.no_grad():
            x = model.encoder.embed(ids)  # (B, L, D)
            first = float(x.pow(2).mean().sqrt())
            model.encoder.encoder(x)  # the hooks see every sublayer's output
    finally:
        for h in handles:
            h.remove()
    return [first, *rms]


def train_run(name: str, layers: int, steps: int) -> tuple[list[float], float]:
    g = seed_all(SEED)
    model = build(name, layers=layers, dropout=0.1)
    log = train_tagger(model, lambda step: make_batch("reverse", 64, 8, 16, g), steps, lr=1e-3, warmup=50)
    ids, targets = make_batch("reverse", 512, 8, 16, g)
    return log.losses, evaluate_tagger(model, ids, targets)


def run(out: Path, quick: bool = False) -> Result:
    """Stream RMS per sublayer and training curves per placement; two panels."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    depth, train_layers, steps = (6, 2, 150) if quick else (12, 3, 400)
    rms = {name: stream_rms(name, depth) for name in PLACEMENTS}
    runs = {}
    for name in PLACEMENTS:
        curve, acc = train_run(name, train_layers, steps)
        tail = curve[-max(1, steps // 10):]
        runs[name] = {"final_loss": sum(tail) / len(tail), "accuracy": acc, "curve": curve}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2))
    for name, values in rms.items():
        ax1.plot(range(len(values)), values, "-o", ms=3, label=f"{name}: {FORMULAS[name]}")
    ax1.set(xlabel=_("sublayer (0 = the embeddings)"), ylabel=_("RMS of the residual stream"), yscale="log",
            title=_("an untrained encoder of {depth} layers").format(depth=depth))
    ax1.legend(fontsize=8)
    for name, r in runs.items():
        ax2.plot(r["curve"], label=f"{name}: {pct(r['accuracy'])}")
    ax2.set(xlabel=_("step"), ylabel=_("training loss"), yscale="log",
            title=_("tagger, `reverse`, N={n}, dropout 0.1, {steps} steps").format(n=train_layers, steps=steps))
    ax2.legend()
    fig.tight_layout()
    figure = save_figure(fig, out, "add-and-norm")
    numbers = {"depth": depth, "formulas": FORMULAS, "stream_rms": rms,
               "train_layers": train_layers, "steps": steps,
               "training": {k: {"final_loss": v["final_loss"], "accuracy": v["accuracy"]} for k, v in runs.items()}}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    depth, rms, runs = numbers["depth"], numbers["stream_rms"], numbers["training"]
    train_layers, steps = numbers["train_layers"], numbers["steps"]
    growth = {name: values[-1] / values[1] for name, values in rms.items()}
    best = max(runs, key=lambda k: runs[k]["accuracy"])
    return _(
        "After {sublayers} sublayers the residual stream's RMS is {rms}: the seeds' placements add a normalised F(x) "
        "each time, so the stream grows {g000:.1f}x (seed000) and {g003:.1f}x (seed003) from the first sublayer to "
        "the last, where post-norm stays at {post:.2f}. Training N={n} for {steps} steps: {accuracies}; best: {best}."
    ).format(sublayers=2 * depth, rms=", ".join(f"{rms[n][-1]:.2f} ({n})" for n in PLACEMENTS),
             g000=growth["seed000"], g003=growth["seed003"], post=rms["post"][-1], n=train_layers, steps=steps,
             accuracies=", ".join(f"{n} {pct(runs[n]['accuracy'])}" for n in PLACEMENTS), best=best)

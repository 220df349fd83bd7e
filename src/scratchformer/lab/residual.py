"""Lab `residual`: training with and without the residual connections (the part seed 000 "only half understood").

With them each sublayer computes LayerNorm(x + F(x)) (model/norm.py, SublayerConnection): the input goes round the
box, and so does the gradient on its way back. Without them it computes LayerNorm(F(x)): every signal and every
gradient has to pass through every box. The switch needs no model edit: each SublayerConnection's class is set
to NoResidual, whose forward drops the `x +`. Measured: the gradient that reaches each layer at initialisation,
and the toy tagger's training, for a shallow and a deep stack.
"""

from __future__ import annotations

from collections.abc import Callable
from pathlib import Path
from typing import Any

from torch import Tensor

from scratchformer.i18n import _
from scratchformer.lab.common import (
    Result,
    Tagger,
    evaluate_tagger,
    make_batch,
    pct,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)
from scratchformer.model.norm import SublayerConnection
from scratchformer.training.loss import label_smoothed_loss

SEED = 0
TASK = "reverse"


class NoResidual(SublayerConnection):
    """LayerNorm(Dropout(Sublayer(x))): Add & Norm without the Add."""

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:  # (B, L, D) -> (B, L, D)
        return self.norm(self._drop(sublayer(x)))


def build(layers: int, residual: bool) -> Tagger:
    seed_all(SEED)
    model = Tagger(tagger_config(layers=layers))
    if not residual:
        for m in model.modules():
            if type(m) is SublayerConnection:
                m.__class__ = NoResidual  # the same weights, only the forward changes
    return model


def layer_gradients(layers: int, residual: bool) -> list[float]:
    """Norm of the gradient of the loss w.r.t. each encoder layer's W_qkv at initialisation, first layer first."""
    g = seed_all(SEED)
    model = build(layers, residual)
    ids, targets = make_batch(TASK, 64, 8, 16, g)
    label_smoothed_loss(model(ids), targets, 0.0).loss.backward()
    return [float(layer.self_attn.w_qkv.weight.grad.norm()) for layer in model.encoder.encoder.layers]


def train_run(layers: int, residual: bool, steps: int) -> tuple[list[float], float]:
    g = seed_all(SEED)
    model = build(layers, residual)
    log = train_tagger(model, lambda step: make_batch(TASK, 64, 8, 16, g), steps, lr=1e-3, warmup=50)
    ids, targets = make_batch(TASK, 512, 8, 16, g)
    return log.losses, evaluate_tagger(model, ids, targets)


def run(out: Path, quick: bool = False) -> Result:
    """Gradients per layer and training curves, with and without residuals; two panels."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    depths, steps = ((2,), 150) if quick else ((2, 6), 400)
    deep = 6  # the stack whose gradients are drawn
    grads = {f"{'with' if r else 'without'} residual": layer_gradients(deep, r) for r in (True, False)}
    runs = {}
    for n in depths:
        for residual in (True, False):
            curve, acc = train_run(n, residual, steps)
            tail = curve[-max(1, steps // 10):]
            runs[f"N={n}, {'with' if residual else 'without'} residual"] = {
                "curve": curve, "final_loss": sum(tail) / len(tail), "accuracy": acc}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2))
    for name, values in grads.items():
        ax1.plot(range(1, len(values) + 1), values, "-o", label=name)
    ax1.set(yscale="log", xlabel=_("encoder layer (1 = next to the input)"), ylabel=_("|dL / dW_qkv| at init"),
            title=_("gradient reaching each layer, N={n}").format(n=deep))
    ax1.legend()
    for name, r in runs.items():
        ax2.plot(r["curve"], ls="-" if "with " in name else "--", label=f"{name}: {pct(r['accuracy'])}")
    ax2.set(yscale="log", xlabel=_("step"), ylabel=_("training loss"), title=_("tagger on `{task}`").format(task=TASK))
    ax2.legend(fontsize=8)
    fig.tight_layout()
    figure = save_figure(fig, out, "residual")
    numbers = {"depths": list(depths), "steps": steps, "layer_gradients": grads,
               "training": {k: {"final_loss": v["final_loss"], "accuracy": v["accuracy"]} for k, v in runs.items()}}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    depths, steps, grads = numbers["depths"], numbers["steps"], numbers["layer_gradients"]
    w, wo = grads["with residual"], grads["without residual"]
    acc = {name: r["accuracy"] for name, r in numbers["training"].items()}
    parts = [_("N={n}: {with_} with, {without} without").format(
        n=n, with_=pct(acc[f"N={n}, with residual"]), without=pct(acc[f"N={n}, without residual"])) for n in depths]
    drop = {n: acc[f"N={n}, with residual"] - acc[f"N={n}, without residual"] for n in depths}
    return _(
        "At initialisation (N={deep}), the first layer gets {ratio_w:.2f}x the last layer's gradient with residuals "
        "and {ratio_wo:.2g}x without (first layer: {first_w:.2g} against {first_wo:.2g}). Held-out accuracy after "
        "{steps} steps, {parts}: removing the residuals costs {costs}."
    ).format(deep=len(w), ratio_w=w[0] / w[-1], ratio_wo=wo[0] / wo[-1], first_w=w[0], first_wo=wo[0], steps=steps,
             parts="; ".join(parts),
             costs=", ".join(_("{drop} at N={n}").format(drop=pct(drop[n]), n=n) for n in depths))

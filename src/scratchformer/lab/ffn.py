"""Lab `ffn`: can the feed-forward network be removed? (seed 003, Q6: what is the FFN for; seed 000: attention lets
the tokens "talk", the FFN lets each one "think")

Three toy taggers (lab/common.py), two tasks:
  with FFN, N=2              the usual encoder layer: self-attention, then the FFN, each in Add & Norm
  without FFN, N=2           the same width and depth, each layer's FFN sublayer gone: about half the parameters
  without FFN, N=4           attention only, at equal parameters: with d_ff = 2D an FFN costs what an attention
                             costs (4D^2 + biases), so twice the attention layers make up for it
  reverse                    moving tokens about: attention's work
  add                        y_i = x_i + x_{L-1-i} (mod the alphabet): attention can bring the two tokens together,
                             but a weighted average of two embeddings, read out linearly, is no lookup table of sums;
                             some position-wise non-linearity must compute it
The FFN is removed from outside, as the other labs change the model: each EncoderLayer's class becomes
AttentionOnlyLayer (whose forward has the attention sublayer only) and its FFN and second sublayer are deleted.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from torch import Tensor, nn

from scratchformer.i18n import N_, _
from scratchformer.lab import common
from scratchformer.lab.common import Result, Tagger, make_batch, pct, save_figure
from scratchformer.model.encoder import EncoderLayer

SEED = 0
VOCAB, LENGTH = 16, 8
TASKS = ("reverse", "add")
VARIANTS = ((N_("with FFN, N=2"), 2, True), (N_("without FFN, N=2"), 2, False), (N_("without FFN, N=4"), 4, False))


class AttentionOnlyLayer(EncoderLayer):
    """An encoder layer without its FFN: x -> SublayerConnection(MultiHeadAttention(x, x, x)), nothing after."""

    def forward(self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        return self.sublayer[0](x, lambda y: self.self_attn(y, mask=mask, positions=positions))  # (B, L, D)


def build(layers: int, ffn: bool) -> Tagger:
    common.seed_all(SEED)
    model = Tagger(common.tagger_config(vocab=VOCAB, layers=layers))  # d_ff = 2D
    if not ffn:
        for layer in model.encoder.encoder.layers:
            layer.__class__ = AttentionOnlyLayer
            del layer.feed_forward  # its parameters go with it
            layer.sublayer = nn.ModuleList([layer.sublayer[0]])
    return model


def train_one(task: str, layers: int, ffn: bool, steps: int) -> dict[str, Any]:
    g = common.seed_all(SEED)
    model = build(layers, ffn)
    start = time.perf_counter()
    log = common.train_tagger(model, lambda step: make_batch(task, 64, LENGTH, VOCAB, g), steps, lr=2e-3, warmup=30)
    seconds = time.perf_counter() - start
    ids, targets = make_batch(task, 512, LENGTH, VOCAB, g)
    return {"parameters": sum(p.numel() for p in model.parameters()), "final_loss": log.final,
            "accuracy": common.evaluate_tagger(model, ids, targets), "seconds": seconds, "curve": log.losses}


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    runs = numbers["runs"]
    with_ffn, narrow, equal = (name for name, _layers, _ffn in VARIANTS)
    add, rev = runs["add"], runs["reverse"]
    return _(
        "Equal parameters: {p_with:,} with the FFN (N=2) against {p_equal:,} without it (N=4: the attention layers "
        "doubled); equal width: {p_narrow:,} (N=2, no FFN). On `reverse`, moving tokens about, all three learn it: "
        "{rev}. On `add` (y_i = x_i + x_(L-1-i), mod {k}), a sum computed at each position: with the FFN "
        "{add_with}, without it {add_narrow} at equal width and {add_equal} at equal parameters. Attention brings "
        "the two tokens together; the FFN computes with them."
    ).format(p_with=add[with_ffn]["parameters"], p_equal=add[equal]["parameters"],
             p_narrow=add[narrow]["parameters"],
             rev=", ".join(f"{_(name)} {pct(r['accuracy'])}" for name, r in rev.items()), k=VOCAB - common.FIRST_ID,
             add_with=pct(add[with_ffn]["accuracy"]), add_narrow=pct(add[narrow]["accuracy"]),
             add_equal=pct(add[equal]["accuracy"]))


def run(out: Path, quick: bool = False) -> Result:
    """Three models on two tasks; one panel of training curves per task."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps = 250 if quick else 400
    budget = {"reverse": 120 if quick else steps, "add": steps}  # quick: `reverse` is learnt in ~100 steps
    runs = {task: {name: train_one(task, layers, ffn, budget[task]) for name, layers, ffn in VARIANTS}
            for task in TASKS}
    numbers = {"vocab": VOCAB, "length": LENGTH, "steps": steps, "steps_by_task": budget, "d_model": 64, "d_ff": 128,
               "runs": {task: {name: {k: v for k, v in r.items() if k != "curve"} for name, r in by.items()}
                        for task, by in runs.items()}}
    fig, axes = plt.subplots(1, len(TASKS), figsize=(13, 4.3))
    for ax, task in zip(axes, TASKS):
        for name, r in runs[task].items():
            ax.plot(r["curve"], label=_("{name}: {params:,} parameters, accuracy {acc}").format(
                name=_(name), params=r["parameters"], acc=pct(r["accuracy"])))
        ax.set(xlabel=_("step"), ylabel=_("training loss"), yscale="log",
               title=_("tagger, `{task}`, D=64, d_ff=128, {steps} steps").format(task=task, steps=budget[task]))
        ax.legend(fontsize=8)
    fig.tight_layout()
    figure = save_figure(fig, out, "ffn")
    return Result(numbers, conclude(numbers), figure)

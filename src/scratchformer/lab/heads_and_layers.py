"""Lab `heads-and-layers`: seed 000's exercise, "change the heads from 8 to 4 and the layers from 6 to 2, then
watch the shapes and the training" (把 head 数从 8 改到 4，把层数从 6 改到 2，观察 shape 变化和训练效果).

Four encoder-decoders of the same width D (the project's own EncoderDecoder, lab/common.py's Seq2Seq): seed 000's
h=8, N=6, then 4 heads, then 2 layers, then both. For each:
  - the shapes, read from the model: one attention's score matrix (B, h, L_q, L_k) at seed 000's batch 2 and
    length 4 (keep_attention_weights), each head's width d_k = D / h, and how many attention boxes the model has;
  - the parameters: h does not change them (W^Q, W^K, W^V, W^O stay D x D, only cut into h slices); N does;
  - a short teacher-forced training on the toy `reverse` task (curves, time per step on this CPU), then held-out
    token accuracy, teacher-forced and free-running (greedy), and whole sequences right.
The conclusion is built from the numbers by `conclude`, so the page can render it in either language.
"""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

import torch

from scratchformer.i18n import _
from scratchformer.lab import common
from scratchformer.lab.common import PAD, Result, Seq2Seq, free_running, pct, save_figure, seq2seq_batch
from scratchformer.model.attention import MultiHeadAttention

SEED = 0
VOCAB, LENGTH = 16, 8
CONFIGS = ((8, 6), (4, 6), (8, 2), (4, 2))  # (h, N): seed 000's model first, its exercise last


def name(h: int, n: int) -> str:
    return f"h={h}, N={n}"


def shapes(model: Seq2Seq) -> dict[str, Any]:
    """At seed 000's sizes (batch 2, length 4): the first encoder self-attention's scores (B, h, L_q, L_k), read
    from the model, each head's d_k, and the number of attention boxes (N encoder self, N decoder self, N cross)."""
    inner = model.model
    inner.keep_attention_weights(True)
    try:
        g = torch.Generator().manual_seed(SEED)
        (src, tgt_in), _tgt_out = seq2seq_batch("reverse", 2, 4, VOCAB, g)
        with torch.no_grad():
            model((src, tgt_in[:, :4]))
        attention = inner.encoder.layers[0].self_attn
        scores = list(attention.attention.last_weights.shape)
    finally:
        inner.keep_attention_weights(False)
    boxes = sum(1 for m in inner.modules() if isinstance(m, MultiHeadAttention))
    c = inner.config
    return {"scores": scores, "d_k": c.d_model // c.n_heads, "per_head_q": [2, c.n_heads, 4, c.d_model // c.n_heads],
            "attention_boxes": boxes}


def train_one(h: int, n: int, d_model: int, steps: int) -> dict[str, Any]:
    g = common.seed_all(SEED)
    model = Seq2Seq(common.seq2seq_config(vocab=VOCAB, d_model=d_model, n_heads=h, layers=n))
    found = shapes(model)
    params = sum(p.numel() for p in model.parameters())
    start = time.perf_counter()
    log = common.train_tagger(model, lambda step: seq2seq_batch("reverse", 64, LENGTH, VOCAB, g), steps, lr=2e-3,
                              warmup=50)
    seconds = time.perf_counter() - start
    (src, tgt_in), tgt_out = seq2seq_batch("reverse", 512, LENGTH, VOCAB, g)
    with torch.no_grad():
        forced = common.accuracy(model((src, tgt_in)), tgt_out)
    free = free_running(model, src, tgt_out.size(1))
    real = tgt_out != PAD
    return {"h": h, "N": n, "parameters": params, **found, "ms_per_step": 1000 * seconds / max(1, steps),
            "final_loss": log.final, "diverged": log.diverged, "teacher_forced_accuracy": forced,
            "free_running_accuracy": float((free == tgt_out)[real].float().mean()),
            "sequences_right": float(((free == tgt_out) | ~real).all(1).float().mean()), "curve": log.losses}


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    runs = numbers["runs"]
    seed, heads, layers, both = (runs[name(h, n)] for h, n in CONFIGS)
    fastest = min(runs.values(), key=lambda r: r["ms_per_step"])
    best = max(runs.values(), key=lambda r: (r["free_running_accuracy"], -r["ms_per_step"]))
    return _(
        "Shapes: 8 -> 4 heads turns each attention's scores from {s8} into {s4} and doubles each head's d_k "
        "({d8} -> {d4}), but leaves the parameters at {p6:,} (W^Q, W^K, W^V, W^O stay D x D, cut into fewer slices); "
        "6 -> 2 layers cuts the attention boxes from {b6} to {b2} and the parameters to {p2:,} ({ratio:.1f}x fewer). "
        "Training: {steps} steps on `reverse`; held-out free-running token accuracy {accuracies}; fastest per "
        "step: {fastest} ({fast_ms:.0f} ms against {seed_ms:.0f} ms for h=8, N=6); best: {best}."
    ).format(s8=tuple(seed["scores"]), s4=tuple(heads["scores"]), d8=seed["d_k"], d4=heads["d_k"],
             p6=seed["parameters"], b6=seed["attention_boxes"], b2=layers["attention_boxes"], p2=both["parameters"],
             ratio=seed["parameters"] / both["parameters"], steps=numbers["steps"],
             accuracies=", ".join(f"{k} {pct(r['free_running_accuracy'])}" for k, r in runs.items()),
             fastest=name(fastest["h"], fastest["N"]), fast_ms=fastest["ms_per_step"], seed_ms=seed["ms_per_step"],
             best=name(best["h"], best["N"]))


def run(out: Path, quick: bool = False) -> Result:
    """The four models' training curves and held-out accuracies; two panels."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    d_model, steps = (32, 100) if quick else (64, 300)
    runs = {name(h, n): train_one(h, n, d_model, steps) for h, n in CONFIGS}
    numbers = {"d_model": d_model, "vocab": VOCAB, "length": LENGTH, "steps": steps, "task": "reverse",
               "runs": {k: {key: v for key, v in r.items() if key != "curve"} for k, r in runs.items()}}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.3))
    for key, r in runs.items():
        ax1.plot(r["curve"], label=_("{name}: {params:,} parameters, {ms:.0f} ms/step").format(
            name=key, params=r["parameters"], ms=r["ms_per_step"]))
    ax1.set(xlabel=_("step"), ylabel=_("training loss"), yscale="log",
            title=_("encoder-decoder, D={d}, `reverse`, {steps} steps").format(d=d_model, steps=steps))
    ax1.legend(fontsize=8)
    metrics = (("teacher_forced_accuracy", _("token accuracy\n(teacher-forced)")),
               ("free_running_accuracy", _("token accuracy\n(free-running)")),
               ("sequences_right", _("whole sequences\nright (free-running)")))
    width = 0.2
    for i, (key, r) in enumerate(runs.items()):
        ax2.bar([j + (i - 1.5) * width for j in range(len(metrics))], [r[m] for m, _label in metrics], width,
                label=key)
    ax2.set_xticks(range(len(metrics)), [label for _m, label in metrics])
    ax2.set(ylim=(0, 1.05), title=_("held-out, 512 sequences of length {n}").format(n=LENGTH))
    ax2.legend(fontsize=8)
    fig.tight_layout()
    figure = save_figure(fig, out, "heads-and-layers")
    return Result(numbers, conclude(numbers), figure)

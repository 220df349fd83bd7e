"""Lab `layernorm-vs-batchnorm`: why the Transformer normalises each token (LayerNorm) and not each feature over
the batch (BatchNorm), when batches hold sentences of different lengths padded to the longest (seeds 000, 003).

LayerNorm's mean and variance are over the D features of one token: a token's output cannot depend on the other
sentences of the batch, nor on how much padding they bring. BatchNorm's are over all B x L positions of the
batch, padding included. Here every LayerNorm in Add & Norm (model/norm.py's SublayerConnection.norm) is swapped
for a BatchNorm1d over the tokens, without editing the model, and the two are compared: part 1 exactly (one
sentence, batched with short or long neighbours), part 2 by training the toy tagger on padded batches.
"""

from __future__ import annotations

import random
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.i18n import _
from scratchformer.lab.common import (
    PAD,
    Result,
    Tagger,
    accuracy,
    make_batch,
    pct,
    save_figure,
    seed_all,
    tagger_config,
    train_tagger,
)
from scratchformer.model.norm import SublayerConnection

SEED = 0
VOCAB = 16


class TokenBatchNorm(nn.Module):
    """BatchNorm1d over every position of the batch, padding included: (B, L, D) -> (B, L, D)."""

    def __init__(self, d_model: int) -> None:
        super().__init__()
        self.bn = nn.BatchNorm1d(d_model)

    def forward(self, x: Tensor) -> Tensor:
        return self.bn(x.reshape(-1, x.size(-1))).view_as(x)  # statistics over B*L tokens


def with_batchnorm(model: nn.Module) -> nn.Module:
    """Swap the LayerNorm of every Add & Norm for a TokenBatchNorm; returns model."""
    for m in model.modules():
        if isinstance(m, SublayerConnection):
            m.norm = TokenBatchNorm(m.norm.weight.numel())
    return model


def build(kind: str) -> Tagger:
    seed_all(SEED)
    model = Tagger(tagger_config(vocab=VOCAB))
    return with_batchnorm(model) if kind == "BatchNorm" else model


def neighbour_gap(model: nn.Module, train_mode: bool) -> float:
    """max |output of sentence A| between a batch where A's neighbour has 5 tokens and one where it has 24."""
    g = torch.Generator().manual_seed(SEED + 1)
    a = torch.randint(3, VOCAB, (5,), generator=g)
    outputs = []
    for width in (5, 24):
        batch = torch.full((2, width), PAD)
        batch[0, :5] = a
        batch[1] = torch.randint(3, VOCAB, (width,), generator=g)
        model.train(train_mode)
        with torch.no_grad():
            outputs.append(model(batch)[0, :5])  # (5, V): A's real positions only
    model.eval()
    return float((outputs[0] - outputs[1]).abs().max())


def padded_batches(rng: random.Random, g: torch.Generator, batch: int, longest: int):
    """batches(step) of the reverse task with lengths drawn from 2..longest, right-padded."""
    def batches(_step: int) -> tuple[Tensor, Tensor]:
        return make_batch("reverse", batch, [rng.randint(2, longest) for _ in range(batch)], VOCAB, g)
    return batches


def padded_accuracy(model: nn.Module, short: tuple[Tensor, Tensor], pad_to: int, train_mode: bool) -> float:
    """Accuracy on the `short` sentences, each padded to `pad_to` (more padding, same words)."""
    ids, targets = short
    extra = pad_to - ids.size(1)
    ids, targets = nn.functional.pad(ids, (0, extra), value=PAD), nn.functional.pad(targets, (0, extra), value=PAD)
    model.train(train_mode)
    with torch.no_grad():
        acc = accuracy(model(ids), targets)
    model.eval()
    return acc


def run(out: Path, quick: bool = False) -> Result:
    """Part 1 (exact gaps) and part 2 (training on padded batches); two panels."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps, longest = (150, 8) if quick else (500, 12)
    gaps = {kind: {mode: neighbour_gap(build(kind), mode == "train") for mode in ("train", "eval")}
            for kind in ("LayerNorm", "BatchNorm")}
    results = {}
    for kind in ("LayerNorm", "BatchNorm"):
        model = build(kind)
        rng, g = random.Random(SEED), torch.Generator().manual_seed(SEED)
        log = train_tagger(model, padded_batches(rng, g, 64, longest), steps, lr=3e-3, warmup=30)
        short = make_batch("reverse", 256, 4, VOCAB, g)  # held-out sentences of 4 tokens
        results[kind] = {"final_loss": log.final, **{
            f"{mode}, padded to {width}": padded_accuracy(model, short, width, mode == "batch statistics")
            for mode in ("running statistics", "batch statistics") for width in (4, 3 * longest)}}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.2))
    labels = [f"{k}\n{m} mode" for k in gaps for m in gaps[k]]
    ax1.bar(labels, [max(gaps[k][m], 1e-9) for k in gaps for m in gaps[k]],
            color=["tab:blue", "tab:blue", "tab:orange", "tab:orange"])
    ax1.set(yscale="log", ylabel=_("max |change| of sentence A's logits (0 drawn at 1e-9)"),
            title=_("A's output: neighbour of 5 tokens vs 24 tokens"))
    keys = [k for k in results["LayerNorm"] if k != "final_loss"]
    width = 0.38
    for i, kind in enumerate(results):
        ax2.bar([j + (i - 0.5) * width for j in range(len(keys))], [results[kind][k] for k in keys], width,
                label=kind)
    ax2.set_xticks(range(len(keys)), [k.replace(", ", ",\n") for k in keys])
    ax2.set(ylim=(0, 1.05), ylabel=_("accuracy on 4-token sentences"),
            title=_("tagger trained {steps} steps on padded batches (lengths 2-{longest})").format(
                steps=steps, longest=longest))
    ax2.legend(loc="lower left")
    fig.tight_layout()
    figure = save_figure(fig, out, "layernorm-vs-batchnorm")
    numbers = {"steps": steps, "train_lengths": [2, longest], "neighbour_gap": gaps, "training": results}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    steps, longest, gaps, results = (numbers["steps"], numbers["train_lengths"][1], numbers["neighbour_gap"],
                                     numbers["training"])
    ln, bn = results["LayerNorm"], results["BatchNorm"]
    long_key = f"batch statistics, padded to {3 * longest}"
    short_acc = bn["batch statistics, padded to 4"]
    change = (_("padding changed the accuracy by {d}").format(d=pct(abs(short_acc - bn[long_key])))
              if short_acc != bn[long_key] else _("padding did not change the accuracy"))
    return _(
        "Batched beside a 5-token or a 24-token sentence, sentence A's logits move by {ln_gap:.1e} with LayerNorm "
        "(each token normalised alone) and by {bn_gap:.2f} with BatchNorm in training mode (its statistics count the "
        "neighbour's tokens and the padding; in eval mode, with running statistics, {bn_eval:.1e}). After {steps} "
        "steps on padded batches, 4-token sentences padded to 4 and to {wide}: LayerNorm {ln_4} and {ln_wide}; "
        "BatchNorm with batch statistics {bn_4} and {bn_wide} ({change}), with running statistics {bn_run}."
    ).format(ln_gap=gaps["LayerNorm"]["train"], bn_gap=gaps["BatchNorm"]["train"], bn_eval=gaps["BatchNorm"]["eval"],
             steps=steps, wide=3 * longest, ln_4=pct(ln["running statistics, padded to 4"]),
             ln_wide=pct(ln[f"running statistics, padded to {3 * longest}"]),
             bn_4=pct(bn["batch statistics, padded to 4"]), bn_wide=pct(bn[long_key]), change=change,
             bn_run=pct(bn["running statistics, padded to 4"]))

"""Lab `label-smoothing`: eps = 0 against the paper's eps = 0.1 (section 5.4), for accuracy, BLEU and calibration.

The paper: label smoothing "hurts perplexity, as the model learns to be more unsure, but improves accuracy and
BLEU". Calibration asks whether a model that says 90% is right 90% of the time; the expected calibration error
(ECE) is the mean gap |accuracy - confidence| over confidence bins, weighted by their sizes. The toy tagger learns
`reverse` from a fixed training set whose labels are noisy (a share of the targets replaced by random tokens), as
real references are: trained many epochs, it can memorise the noise and grow over-confident. Both runs use the
project's loss (training/loss.py, `label_smoothed_loss`), differing only in eps.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.evaluation.metrics import bleu
from scratchformer.i18n import _
from scratchformer.lab import common
from scratchformer.lab.common import FIRST_ID, PAD, Result, Tagger, make_batch, train_tagger

SEED = 0
VOCAB, LENGTH, NOISE, BINS = 16, 8, 0.1, 10


def noisy(targets: Tensor, g: torch.Generator) -> Tensor:
    """targets with a share NOISE of the real positions replaced by a random token."""
    flip = (torch.rand(targets.shape, generator=g) < NOISE) & (targets != PAD)
    return torch.where(flip, torch.randint(FIRST_ID, VOCAB, targets.shape, generator=g), targets)


def calibration(probs: Tensor, targets: Tensor) -> dict[str, object]:
    """ECE over BINS equal-width confidence bins, the mean confidence, accuracy, and the reliability table."""
    conf, pred = probs.max(-1)  # (N,), (N,)
    right = (pred == targets).float()
    edges = torch.linspace(0, 1, BINS + 1)
    table, ece = [], 0.0
    for lo, hi in zip(edges[:-1], edges[1:]):
        inside = (conf > lo) & (conf <= hi)
        if inside.any():
            gap = float(right[inside].mean() - conf[inside].mean())
            ece += abs(gap) * float(inside.float().mean())
            table.append({"bin": [round(float(lo), 2), round(float(hi), 2)], "count": int(inside.sum()),
                          "confidence": float(conf[inside].mean()), "accuracy": float(right[inside].mean())})
    return {"ece": ece, "confidence": float(conf.mean()), "accuracy": float(right.mean()), "bins": table}


def sentence_bleu_corpus(logits: Tensor, clean: Tensor) -> float:
    """Corpus BLEU (sacreBLEU, tokenize 13a) of the argmax sequences against the clean reversed sequences."""
    hyps = [" ".join(f"w{t}" for t in row) for row in logits.argmax(-1).tolist()]
    refs = [" ".join(f"w{t}" for t in row) for row in clean.tolist()]
    return float(bleu(hyps, refs, tokenize="13a")["score"])


def run_eps(eps: float, steps: int, train_size: int) -> dict[str, object]:
    """Train with label-smoothing eps on a fixed noisy training set; scores on held-out data."""
    g = common.seed_all(SEED)
    ids, clean = make_batch("reverse", train_size, LENGTH, VOCAB, g)
    labels = noisy(clean, g)
    test_ids, test_clean = make_batch("reverse", 1024, LENGTH, VOCAB, g)
    test_labels = noisy(test_clean, g)
    order = torch.Generator().manual_seed(SEED)

    def batches(_step: int) -> tuple[Tensor, Tensor]:
        pick = torch.randint(0, train_size, (64,), generator=order)
        return ids[pick], labels[pick]

    model = Tagger(common.tagger_config(vocab=VOCAB))
    log = train_tagger(model, batches, steps, lr=2e-3, warmup=30, eps=eps)
    with torch.no_grad():
        logits = model(test_ids)  # (N, L, V)
    probs = logits.softmax(-1).reshape(-1, VOCAB)
    noisy_cal = calibration(probs, test_labels.reshape(-1))
    return {"eps": eps, "final_train_loss": log.final, "accuracy_clean": float(
        (logits.argmax(-1) == test_clean).float().mean()), "bleu_clean": sentence_bleu_corpus(logits, test_clean),
        "ece": noisy_cal["ece"], "confidence": noisy_cal["confidence"], "accuracy_noisy": noisy_cal["accuracy"],
        "reliability": noisy_cal["bins"]}


def run(out: Path, quick: bool = False) -> Result:
    """eps 0 and 0.1; panels: reliability diagram and the scores."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps, train_size = (300, 256) if quick else (800, 512)
    runs = {f"eps={eps}": run_eps(eps, steps, train_size) for eps in (0.0, 0.1)}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4.3))
    ax1.plot([0, 1], [0, 1], color="gray", ls=":", label=_("perfect calibration"))
    for name, r in runs.items():
        bins = r["reliability"]
        ax1.plot([b["confidence"] for b in bins], [b["accuracy"] for b in bins], "-o",
                 label=f"{name}: ECE {r['ece']:.3f}")
    ax1.set(xlabel=_("confidence (max probability)"), ylabel=_("accuracy in that bin"),
            title=_("reliability diagram (held-out, labels {noise} noisy)").format(noise=common.pct(NOISE)))
    ax1.legend()
    keys = ("accuracy_clean", "confidence", "ece")
    width = 0.38
    for i, (name, r) in enumerate(runs.items()):
        ax2.bar([j + (i - 0.5) * width for j in range(len(keys) + 1)], [r[k] for k in keys] + [r["bleu_clean"] / 100],
                width, label=name)
    ax2.set_xticks(range(len(keys) + 1), ["accuracy\n(clean)", "mean\nconfidence", "ECE", "BLEU / 100\n(clean)"])
    ax2.set(title=_("tagger, `reverse`, {steps} steps on {size} noisy sequences").format(steps=steps, size=train_size))
    ax2.legend()
    fig.tight_layout()
    figure = common.save_figure(fig, out, "label-smoothing")
    numbers = {"steps": steps, "train_size": train_size, "noise": NOISE, "bins": BINS, "runs": runs}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    runs = numbers["runs"]
    a, b = runs["eps=0.0"], runs["eps=0.1"]
    return _(
        "Without smoothing the tagger's mean confidence is {a[confidence]:.3f} for an accuracy of "
        "{a[accuracy_noisy]:.3f} on noisy held-out labels (ECE {a[ece]:.3f}); with eps=0.1 it is {b[confidence]:.3f} "
        "for {b[accuracy_noisy]:.3f} (ECE {b[ece]:.3f}): label smoothing {lowers} the calibration error "
        "({ratio:.1f}x). Against the clean references: accuracy {acc_a} vs {acc_b}, BLEU {a[bleu_clean]:.1f} vs "
        "{b[bleu_clean]:.1f} ({higher})."
    ).format(a=a, b=b, lowers=_("lowers") if b["ece"] < a["ece"] else _("does not lower"),
             ratio=a["ece"] / max(b["ece"], 1e-9), acc_a=common.pct(a["accuracy_clean"]),
             acc_b=common.pct(b["accuracy_clean"]),
             higher=_("eps=0.1 higher") if b["bleu_clean"] > a["bleu_clean"] else _("eps=0 higher or equal"))

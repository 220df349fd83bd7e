"""Lab `exposure-bias`: teacher forcing trains on the reference prefix; decoding reads the model's own (seed 001:
"这样收敛快，但会造成训练/推理不一致（exposure bias）。解决办法是计划采样（scheduled sampling）").

A small encoder-decoder (lab/common.py's Seq2Seq, D=64, h=4, N=2) learns the toy `reverse` task at length 12,
teacher-forced, for a short budget, so that it still makes mistakes. On held-out sequences, by output position:
  teacher-forced   the decoder reads the reference prefix (how it was trained): one forward pass
  free-running     it reads its own previous outputs (greedy decoding, decoding/greedy.py): how it is used
  after an error   free-running, only the sequences where some earlier position was already wrong
The gap between the first two is exposure bias; the third shows why it grows: the model never saw its own
mistakes in its input during training. A second model is trained with scheduled sampling (Bengio et al., 2015):
each reference token of the decoder's input is replaced by the model's own prediction (from a first, no-gradient
pass) with a probability that rises linearly from 0 to MAX_SAMPLING over the training.
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.i18n import N_, _
from scratchformer.lab import common
from scratchformer.lab.common import PAD, Result, Seq2Seq, free_running, pct, save_figure, seq2seq_batch

SEED = 0
VOCAB, LENGTH = 16, 12
MAX_SAMPLING = 0.25  # scheduled sampling: the share of the decoder's input taken from the model at the end
RUNS = (N_("teacher forcing"), N_("scheduled sampling"))


class ScheduledSampling(Seq2Seq):
    """Seq2Seq whose training forward mixes the model's own greedy predictions into the decoder's input, each
    reference token replaced with probability p = MAX_SAMPLING x (calls so far / steps)."""

    def __init__(self, config, steps: int, generator: torch.Generator) -> None:
        super().__init__(config)
        self.steps, self.calls, self.generator = steps, 0, generator

    def forward(self, pair: tuple[Tensor, Tensor]) -> Tensor:
        src, tgt_in = pair
        if not self.training:
            return self.model(src, tgt_in)
        p = MAX_SAMPLING * min(1.0, self.calls / self.steps)
        self.calls += 1
        with torch.no_grad():
            guess = self.model(src, tgt_in).argmax(-1)  # (B, L): position t predicts tgt_in's token t+1
        swap = (torch.rand(tgt_in[:, 1:].shape, generator=self.generator) < p) & (tgt_in[:, 1:] != PAD)
        mixed = tgt_in.clone()
        mixed[:, 1:] = torch.where(swap, guess[:, :-1], tgt_in[:, 1:])
        return self.model(src, mixed)  # (B, L, V)


def by_position(model: Seq2Seq, src: Tensor, tgt_in: Tensor, tgt_out: Tensor) -> dict[str, list[float | None]]:
    """Token accuracy per output position: teacher-forced, free-running, and free-running after an earlier error."""
    model.eval()
    with torch.no_grad():
        forced = (model((src, tgt_in)).argmax(-1) == tgt_out).float()  # (B, L+1)
    free = (free_running(model, src, tgt_out.size(1)) == tgt_out).float()  # (B, L+1)
    clean = torch.cat([torch.ones_like(free[:, :1]), free.cumprod(1)[:, :-1]], 1).bool()  # every earlier one right
    after = [float(free[~clean[:, t], t].mean()) if int((~clean[:, t]).sum()) >= 10 else None
             for t in range(free.size(1))]  # None: fewer than 10 such sequences
    return {"teacher_forced": forced.mean(0).tolist(), "free_running": free.mean(0).tolist(), "after_an_error": after,
            "with_an_error_before": (~clean).float().mean(0).tolist(),
            "teacher_forced_mean": float(forced.mean()), "free_running_mean": float(free.mean()),
            "sequences_right": float(free.all(1).float().mean())}


def train_one(kind: str, steps: int) -> dict[str, Any]:
    g = common.seed_all(SEED)
    config = common.seq2seq_config(vocab=VOCAB, layers=2)
    model = ScheduledSampling(config, steps, torch.Generator().manual_seed(SEED)) if kind == RUNS[1] \
        else Seq2Seq(config)
    log = common.train_tagger(model, lambda step: seq2seq_batch("reverse", 64, LENGTH, VOCAB, g), steps, lr=2e-3,
                              warmup=50)
    (src, tgt_in), tgt_out = seq2seq_batch("reverse", 1024, LENGTH, VOCAB, g)
    return {"final_loss": log.final, "curve": log.losses, **by_position(model, src, tgt_in, tgt_out)}


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    tf, ss = (numbers["runs"][k] for k in RUNS)
    gaps = [a - b for a, b in zip(tf["teacher_forced"], tf["free_running"])]
    worst = max(range(len(gaps)), key=gaps.__getitem__)
    after = [a for a in tf["after_an_error"] if a is not None]
    return _(
        "Trained {steps} steps with teacher forcing, the model gets {tf_mean} of the held-out tokens right when it "
        "reads the true prefix and {fr_mean} when it reads its own outputs (free-running); the gap is widest at "
        "output position {worst} ({tf_at} against {fr_at}). Once an earlier token is wrong, the positions after it "
        "are right only {after} of the time on average: the model never saw its own mistakes in training. "
        "Whole sequences right: {seq_tf}. With scheduled sampling (up to {max_p} of the input from the model): "
        "{ss_tf} teacher-forced, {ss_fr} free-running, {seq_ss} of the sequences right."
    ).format(steps=numbers["steps"], tf_mean=pct(tf["teacher_forced_mean"]), fr_mean=pct(tf["free_running_mean"]),
             worst=worst, tf_at=pct(tf["teacher_forced"][worst]), fr_at=pct(tf["free_running"][worst]),
             after=pct(sum(after) / len(after)) if after else "-", seq_tf=pct(tf["sequences_right"]),
             max_p=pct(MAX_SAMPLING), ss_tf=pct(ss["teacher_forced_mean"]), ss_fr=pct(ss["free_running_mean"]),
             seq_ss=pct(ss["sequences_right"]))


def run(out: Path, quick: bool = False) -> Result:
    """Accuracy by position for the teacher-forced model; the scheduled-sampling model beside it."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    steps = 150 if quick else 250
    runs = {kind: train_one(kind, steps) for kind in RUNS}
    numbers = {"vocab": VOCAB, "length": LENGTH, "steps": steps, "max_sampling": MAX_SAMPLING, "d_model": 64,
               "runs": {k: {key: v for key, v in r.items() if key != "curve"} for k, r in runs.items()}}
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.3))
    positions = range(LENGTH + 1)
    tf = runs[RUNS[0]]
    ax1.plot(positions, tf["teacher_forced"], "-o", ms=3, label=_("teacher-forced (reads the true prefix)"))
    ax1.plot(positions, tf["free_running"], "-o", ms=3, label=_("free-running (reads its own outputs)"))
    ax1.plot(positions, [float("nan") if a is None else a for a in tf["after_an_error"]], ":o", ms=3,
             label=_("free-running, after an earlier error"))
    ax1.set(xlabel=_("output position (the last is </s>)"), ylabel=_("token accuracy"), ylim=(0, 1.02),
            title=_("trained with teacher forcing, {steps} steps, `reverse`, length {n}").format(steps=steps,
                                                                                                 n=LENGTH))
    ax1.legend(fontsize=8)
    for kind, r in runs.items():
        ax2.plot(positions, r["free_running"], "-o", ms=3, label=_("{kind}: free-running").format(kind=_(kind)))
        ax2.plot(positions, r["teacher_forced"], ":", label=_("{kind}: teacher-forced").format(kind=_(kind)))
    ax2.set(xlabel=_("output position (the last is </s>)"), ylabel=_("token accuracy"), ylim=(0, 1.02),
            title=_("scheduled sampling, up to {p} of the input from the model").format(p=pct(MAX_SAMPLING)))
    ax2.legend(fontsize=8)
    fig.tight_layout()
    figure = save_figure(fig, out, "exposure-bias")
    return Result(numbers, conclude(numbers), figure)

"""Lab `scaling`: why attention divides by sqrt(d_k) (seed 003's variance argument, and its Q2).

For q, k with unit-variance entries, q . k has variance d_k: without the scale the scores grow like sqrt(d_k),
the softmax tends to one-hot (the maximum weight -> 1, the entropy -> 0) and the gradient through it vanishes.
Part 1 measures that on random vectors for a range of d_k; part 2 trains the toy tagger with and without the
scale. "Without" needs no model edit: a forward hook on W_qkv multiplies the queries by sqrt(d_k), which cancels
the division in model/attention.py (`scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))`).
"""

from __future__ import annotations

import math
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.i18n import _
from scratchformer.lab import common
from scratchformer.lab.common import Result, Tagger, evaluate_tagger, make_batch, train_tagger
from scratchformer.model.attention import MultiHeadAttention

SEED = 0
KEYS = 32  # keys per query in part 1


def softmax_statistics(d_k: int, scaled: bool, queries: int = 256) -> dict[str, float]:
    """Mean max weight, entropy (nats) and gradient norms, d(loss)/d(scores) through the softmax and d(loss)/d(q),
    of softmax(q k^T [/ sqrt(d_k)]) for random unit-variance q, k and a random gradient arriving at the weights."""
    g = torch.Generator().manual_seed(SEED + d_k)
    q = torch.randn(queries, 1, d_k, generator=g).requires_grad_(True)  # (Q, 1, d_k)
    k = torch.randn(queries, KEYS, d_k, generator=g)  # (Q, L_k, d_k)
    upstream = torch.randn(queries, 1, KEYS, generator=g)  # (Q, 1, L_k)
    scores = q @ k.transpose(-2, -1)  # (Q, 1, L_k), variance d_k
    if scaled:
        scores = scores / math.sqrt(d_k)  # variance 1
    scores.retain_grad()
    weights = scores.softmax(-1)  # (Q, 1, L_k)
    (weights * upstream).sum().backward()
    weights = weights.detach()
    entropy = -(weights * weights.clamp_min(1e-30).log()).sum(-1)  # (Q, 1)
    return {"max_weight": float(weights.max(-1).values.mean()), "entropy": float(entropy.mean()),
            "grad_scores": float(scores.grad.norm(dim=-1).mean()), "grad_q": float(q.grad.norm(dim=-1).mean()),
            "score_std": float(scores.detach().std())}


def unscale(model: nn.Module) -> list:
    """Hooks on every self-attention's W_qkv that multiply the queries by sqrt(d_k): the scores lose the scale."""
    handles = []
    for m in model.modules():
        if isinstance(m, MultiHeadAttention) and not m.cross:
            hq, factor = m.h * m.d_k, math.sqrt(m.d_k)

            def hook(_mod: nn.Module, _inp: tuple, out: Tensor, hq: int = hq, factor: float = factor) -> Tensor:
                return torch.cat([out[..., :hq] * factor, out[..., hq:]], dim=-1)  # (B, L, h*(2 d_k + d_v))

            handles.append(m.w_qkv.register_forward_hook(hook))
    return handles


def train_run(scaled: bool, steps: int, d_k: int) -> tuple[list[float], float]:
    """Loss curve and held-out accuracy of the tagger on `reverse` with wide heads (d_k), scaled or not."""
    g = common.seed_all(SEED)
    model = Tagger(common.tagger_config(n_heads=2, d_k=d_k))
    if not scaled:
        unscale(model)
    log = train_tagger(model, lambda step: make_batch("reverse", 64, 8, 16, g), steps, lr=2e-3, warmup=20)
    ids, targets = make_batch("reverse", 512, 8, 16, g)
    return log.losses, evaluate_tagger(model, ids, targets)


def run(out: Path, quick: bool = False) -> Result:
    """Part 1 over d_k, part 2 a short training run; four panels."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    d_ks = [4, 16, 64, 256] if quick else [4, 16, 64, 256, 1024]
    steps, train_dk = (120, 128) if quick else (400, 256)
    stats = {kind: [softmax_statistics(d, kind == "scaled") for d in d_ks] for kind in ("scaled", "unscaled")}
    curves, acc = {}, {}
    for kind in ("scaled", "unscaled"):
        curves[kind], acc[kind] = train_run(kind == "scaled", steps, train_dk)
    names = {"scaled": _("scaled"), "unscaled": _("unscaled")}
    fig, axes = plt.subplots(1, 4, figsize=(17, 3.8))
    for key, ax, label in zip(("max_weight", "entropy", "grad_scores"), axes,
                              (_("mean max attention weight"), _("entropy of the weights (nats)"),
                               _("gradient through softmax |dL/d scores|"))):
        for kind, style in (("scaled", "-o"), ("unscaled", "--s")):
            ax.plot(d_ks, [s[key] for s in stats[kind]], style, label=names[kind])
        ax.set(xscale="log", xlabel="d_k", title=label)
    axes[1].axhline(math.log(KEYS), color="gray", ls=":", label=_("uniform: ln {keys}").format(keys=KEYS))
    for ax in axes[:3]:
        ax.legend()
    axes[2].set_yscale("log")
    for kind in ("scaled", "unscaled"):
        axes[3].plot(curves[kind], label=_("{kind}: accuracy {accuracy}").format(kind=names[kind],
                                                                                  accuracy=common.pct(acc[kind])))
    axes[3].set(xlabel=_("step"), ylabel=_("training loss"), yscale="log",
                title=_("tagger, reverse, d_k={d_k}").format(d_k=train_dk))
    axes[3].legend()
    fig.tight_layout()
    figure = common.save_figure(fig, out, "scaling")
    tail = max(1, steps // 10)
    loss = {k: sum(v[-tail:]) / len(v[-tail:]) for k, v in curves.items()}
    numbers = {"d_k": d_ks, "keys": KEYS, "softmax": stats, "training": {
        "d_k": train_dk, "steps": steps, "final_loss": loss, "accuracy": acc}}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    d_ks, stats, training = numbers["d_k"], numbers["softmax"], numbers["training"]
    train_dk, steps, loss, acc = training["d_k"], training["steps"], training["final_loss"], training["accuracy"]
    names = {"scaled": _("scaled"), "unscaled": _("unscaled")}
    s_hi, u_hi = stats["scaled"][-1], stats["unscaled"][-1]
    s_lo, u_lo = stats["scaled"][0], stats["unscaled"][0]
    better = min(loss, key=loss.get)
    return _(
        "At d_k={d_hi} without the scale, the largest attention weight averages {u_hi[max_weight]:.3f} (with it "
        "{s_hi[max_weight]:.3f}), the entropy is {u_hi[entropy]:.2f} nats against {s_hi[entropy]:.2f} (uniform: "
        "{uniform:.2f}), and the gradient through the softmax is {grad_ratio:.3f}x the scaled one's (at q, where "
        "the unscaled scores are sqrt(d_k) times steeper in q, {grad_q_ratio:.2f}x); at d_k={d_lo} the two differ "
        "by {low_gap:.3f} in max weight. Unscaled, the max weight {grows} with d_k; scaled it stays between "
        "{s_min:.3f} and {s_max:.3f}. Training the tagger (d_k={train_dk}, {steps} steps): final loss "
        "{loss[scaled]:.3f} scaled, {loss[unscaled]:.3f} unscaled ({better} is lower), accuracy {acc_s} against "
        "{acc_u}."
    ).format(d_hi=d_ks[-1], d_lo=d_ks[0], u_hi=u_hi, s_hi=s_hi, uniform=math.log(numbers["keys"]),
             grad_ratio=u_hi["grad_scores"] / s_hi["grad_scores"], grad_q_ratio=u_hi["grad_q"] / s_hi["grad_q"],
             low_gap=abs(u_lo["max_weight"] - s_lo["max_weight"]),
             grows=_("grows") if u_hi["max_weight"] > u_lo["max_weight"] else _("does not grow"),
             s_min=min(s["max_weight"] for s in stats["scaled"]), s_max=max(s["max_weight"] for s in stats["scaled"]),
             train_dk=train_dk, steps=steps, loss=loss, better=names[better], acc_s=common.pct(acc["scaled"]),
             acc_u=common.pct(acc["unscaled"]))

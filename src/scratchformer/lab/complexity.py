"""Lab `complexity`: time and memory of self-attention against sequence length (seed 003's O(n^2 d)).

One MultiHeadAttention (model/attention.py) runs on (1, n, D) for growing n, by both paths: the hand-written
formula (`fused=False`: it builds the (B, h, n, n) score and weight matrices) and torch's fused kernel
(`fused=True`, `F.scaled_dot_product_attention`, which on a CPU walks the keys in blocks and never holds the
n x n matrix). Measured: wall time (median of a few runs), and the peak bytes of the tensors the forward pass
allocates, counted exactly by a TorchDispatchMode that sees every op's outputs. Counted: the FLOPs of the
formula. Each is fitted to n^p on a log-log scale.
"""

from __future__ import annotations

import time
import weakref
from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.utils._python_dispatch import TorchDispatchMode
from torch.utils._pytree import tree_flatten

from scratchformer.i18n import _
from scratchformer.lab.common import Result, fit_exponent, save_figure, seed_all
from scratchformer.model.attention import MultiHeadAttention

D_MODEL, HEADS = 64, 4


class PeakMemory(TorchDispatchMode):
    """Counts the bytes of every tensor an op creates (views excluded) while it lives; `peak` is the most at once."""

    def __init__(self) -> None:
        super().__init__()
        self.live = self.peak = 0

    def _free(self, n: int) -> None:
        self.live -= n

    def __torch_dispatch__(self, func, types, args=(), kwargs=None):
        out = func(*args, **(kwargs or {}))
        for t in tree_flatten(out)[0]:
            if isinstance(t, Tensor) and not t._is_view():
                n = t.untyped_storage().nbytes()
                self.live += n
                self.peak = max(self.peak, self.live)
                weakref.finalize(t, self._free, n)
        return out


def attention_flops(n: int, d_model: int = D_MODEL) -> dict[str, float]:
    """Multiply-adds x 2 of one self-attention on n positions: the n^2 core (QK^T and AV) and the projections."""
    core = 2 * 2 * n * n * d_model  # h heads of d_k = D/h: QK^T and weights @ V, each 2 n^2 d_k per head
    projections = 2 * n * d_model * 3 * d_model + 2 * n * d_model * d_model  # W_qkv and W_o
    return {"core": float(core), "projections": float(projections), "total": float(core + projections)}


def measure(n: int, fused: bool, repeats: int) -> dict[str, float]:
    """Median seconds and peak allocated bytes of one forward pass of self-attention on (1, n, D)."""
    seed_all(0)
    mha = MultiHeadAttention(d_model=D_MODEL, n_heads=HEADS, d_k=D_MODEL // HEADS, d_v=D_MODEL // HEADS,
                             fused=fused).eval()
    x = torch.randn(1, n, D_MODEL)  # (B, n, D)
    with torch.no_grad():
        mha(x)  # warm-up: first calls pay for allocation and kernel selection
        times = []
        for _ in range(repeats):
            start = time.perf_counter()
            mha(x)
            times.append(time.perf_counter() - start)
        with PeakMemory() as counter:
            mha(x)
    return {"seconds": sorted(times)[len(times) // 2], "peak_bytes": counter.peak}


def run(out: Path, quick: bool = False) -> Result:
    """Both paths over n; panels: time, memory, FLOPs, each log-log with its fitted exponent."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    lengths = [64, 128, 256, 512] if quick else [128, 256, 512, 1024, 2048]
    repeats = 3 if quick else 5
    paths = {"hand-written": False, "fused": True}
    data = {name: [measure(n, fused, repeats) for n in lengths] for name, fused in paths.items()}
    flops = [attention_flops(n) for n in lengths]
    fits = {name: {"time": fit_exponent(lengths, [m["seconds"] for m in rows]),
                   "memory": fit_exponent(lengths, [m["peak_bytes"] for m in rows])} for name, rows in data.items()}
    fits["flops"] = {"core": fit_exponent(lengths, [f["core"] for f in flops]),
                     "total": fit_exponent(lengths, [f["total"] for f in flops])}
    fig, axes = plt.subplots(1, 3, figsize=(15, 4))
    for name, rows in data.items():
        axes[0].plot(lengths, [m["seconds"] * 1e3 for m in rows], "-o", label=f"{name}: n^{fits[name]['time']:.2f}")
        axes[1].plot(lengths, [m["peak_bytes"] / 2**20 for m in rows], "-o",
                     label=f"{name}: n^{fits[name]['memory']:.2f}")
    for key in ("core", "total"):
        axes[2].plot(lengths, [f[key] for f in flops], "-o", label=f"{key}: n^{fits['flops'][key]:.2f}")
    for ax, title, unit in zip(axes, (_("time of one forward"), _("peak memory allocated"), _("FLOPs (counted)")),
                               ("ms", "MiB", "FLOPs")):
        ax.set(xscale="log", yscale="log", xlabel=_("sequence length n"), ylabel=unit,
               title=f"{title}, D={D_MODEL}, h={HEADS}")
        ax.legend()
    fig.tight_layout()
    figure = save_figure(fig, out, "complexity")
    numbers = {"lengths": lengths, "d_model": D_MODEL, "heads": HEADS, "measured": data, "flops": flops,
               "exponents": fits, "threads": torch.get_num_threads()}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    lengths, data, fits = numbers["lengths"], numbers["measured"], numbers["exponents"]
    hand, fused = data["hand-written"][-1], data["fused"][-1]
    return _(
        "From n={n0} to n={n1}, the hand-written path's memory grows as n^{mem_hand:.2f} (it holds the n x n scores: "
        "{hand_mib:.1f} MiB at n={n1}), the fused kernel's as n^{mem_fused:.2f} ({fused_mib:.1f} MiB). The attention "
        "FLOPs grow as n^{flops_core:.2f} (with the projections, n^{flops_total:.2f} over this range). Time on this "
        "machine: n^{time_hand:.2f} hand-written, n^{time_fused:.2f} fused; at n={n1} {hand_ms:.1f} ms against "
        "{fused_ms:.1f} ms (fused {ratio:.1f}x {faster})."
    ).format(n0=lengths[0], n1=lengths[-1], mem_hand=fits["hand-written"]["memory"],
             hand_mib=hand["peak_bytes"] / 2**20, mem_fused=fits["fused"]["memory"],
             fused_mib=fused["peak_bytes"] / 2**20, flops_core=fits["flops"]["core"],
             flops_total=fits["flops"]["total"], time_hand=fits["hand-written"]["time"],
             time_fused=fits["fused"]["time"], hand_ms=hand["seconds"] * 1e3, fused_ms=fused["seconds"] * 1e3,
             ratio=hand["seconds"] / fused["seconds"],
             faster=_("faster") if fused["seconds"] < hand["seconds"] else _("slower"))

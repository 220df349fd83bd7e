"""Pictures: positional encodings (heatmap and sine curves), attention heatmaps, training curves.

matplotlib with the headless Agg backend: files only, no screen needed.
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402

from scratchformer.model.embedding import sinusoid_table  # noqa: E402


def plot_positions(path: str | Path, d_model: int = 128, max_len: int = 100,
                   dims: Sequence[int] = (4, 5, 6, 7)) -> Path:
    """Left: the (position x dimension) heatmap of PE. Right: a few dimensions as curves over position."""
    table = sinusoid_table(max_len, d_model).numpy()
    fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
    im = ax1.imshow(table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
    ax1.set(xlabel="embedding dimension", ylabel="position", title=f"sinusoidal PE (d_model={d_model})")
    fig.colorbar(im, ax=ax1)
    for d in dims:
        if d < d_model:
            ax2.plot(table[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})")
    ax2.set(xlabel="position", ylabel="value", title="PE(pos, dim) for a few dimensions")
    ax2.legend()
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_attention(path: str | Path, weights: Tensor, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                   title: str = "cross-attention") -> Path:
    """weights (h, L_tgt, L_src) or (L_tgt, L_src): one heatmap per head (first 8) plus their mean."""
    import matplotlib.font_manager as fm

    w = weights.float().cpu()
    if w.dim() == 2:
        w = w[None]
    heads = [w.mean(0)] + list(w[:8])
    labels = ["mean of heads"] + [f"head {i}" for i in range(min(8, w.size(0)))]
    cols = min(3, len(heads))
    rows = (len(heads) + cols - 1) // cols
    fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 4 * rows), squeeze=False)
    cjk = [f.name for f in fm.fontManager.ttflist if "CJK" in f.name or "Noto Sans SC" in f.name]
    font = {"family": cjk[0]} if cjk else {}
    for ax, m, label in zip(axes.flat, heads, labels):
        ax.imshow(m.numpy(), cmap="viridis", aspect="auto")
        ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=90, fontsize=7, **font)
        ax.set_yticks(range(len(tgt_tokens)), tgt_tokens, fontsize=7, **font)
        ax.set_title(label)
    for ax in list(axes.flat)[len(heads):]:
        ax.axis("off")
    fig.suptitle(title)
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path


def plot_curves(path: str | Path, records: Sequence[dict], title: str = "training") -> Path:
    """Training loss per step and validation loss / BLEU from metrics.jsonl records."""
    train = [(r["step"], r["loss"]) for r in records if r.get("kind") == "train"]
    valid = [(r["step"], r["valid_loss"]) for r in records if r.get("kind") == "valid"]
    bleu = [(r["step"], r["bleu"]) for r in records if r.get("kind") == "valid" and r.get("bleu") is not None]
    fig, ax = plt.subplots(figsize=(8, 4.5))
    if train:
        ax.plot(*zip(*train), label="train loss", alpha=0.8)
    if valid:
        ax.plot(*zip(*valid), "o-", label="valid loss")
    ax.set(xlabel="optimiser step", ylabel="loss (label-smoothed CE)", title=title)
    ax.legend(loc="upper left")
    if bleu:
        ax2 = ax.twinx()
        ax2.plot(*zip(*bleu), "s--", color="tab:green", label="valid BLEU")
        ax2.set_ylabel("BLEU")
        ax2.legend(loc="upper right")
    fig.tight_layout()
    path = Path(path)
    fig.savefig(path, dpi=110)
    plt.close(fig)
    return path

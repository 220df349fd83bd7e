"""Pictures: positional encodings (heatmap and sine curves), attention heatmaps, training curves.

matplotlib with the headless Agg backend: files only, no screen needed. Every figure is drawn and saved inside
`fonts.chinese_text()`, so Chinese labels get real glyphs (inspect/fonts.py).
"""

from __future__ import annotations

from collections.abc import Sequence
from pathlib import Path

import matplotlib

matplotlib.use("Agg")
import matplotlib.pyplot as plt  # noqa: E402
from torch import Tensor  # noqa: E402

from scratchformer.errors import InputError  # noqa: E402
from scratchformer.inspect.fonts import chinese_text  # noqa: E402
from scratchformer.model.embedding import sinusoid_table  # noqa: E402


def output_path(path: str | Path, default_name: str) -> Path:
    """Where a picture really goes: DIR/default_name for an existing directory; NAME.png for a NAME without
    a suffix (matplotlib would add ".png" itself, and the caller would report a file that does not exist)."""
    path = Path(path)
    if path.is_dir():
        return path / default_name
    return path if path.suffix else path.with_name(path.name + ".png")


def _save(fig, path: str | Path, default_name: str) -> Path:
    out = output_path(path, default_name)
    try:
        fig.savefig(out, dpi=110)
    finally:
        plt.close(fig)
    return out


def check_position_sizes(d_model: int, max_len: int, flags: dict[str, str] | None = None) -> None:
    """One-line InputError unless d_model is even and >= 2 and max_len >= 1; `flags` names them for a CLI."""
    flags = {"d_model": "d_model", "max_len": "max_len", **(flags or {})}
    if d_model < 2 or d_model % 2:
        raise InputError(f"{flags['d_model']} {d_model}: sinusoidal positions need an even d_model >= 2 "
                         "(a sin and a cos per frequency)")
    if max_len < 1:
        raise InputError(f"{flags['max_len']} {max_len}: give at least one position")


def plot_positions(path: str | Path, d_model: int = 128, max_len: int = 100,
                   dims: Sequence[int] = (4, 5, 6, 7)) -> Path:
    """Left: the (position x dimension) heatmap of PE. Right: a few dimensions as curves over position.

    Returns the file written (DIR/positions.png for a directory)."""
    check_position_sizes(d_model, max_len)
    table = sinusoid_table(max_len, d_model).numpy()
    dims = [d for d in dims if 0 <= d < d_model] or list(range(min(4, d_model)))
    with chinese_text():
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
        im = ax1.imshow(table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
        ax1.set(xlabel="embedding dimension", ylabel="position", title=f"sinusoidal PE (d_model={d_model})")
        fig.colorbar(im, ax=ax1)
        for d in dims:
            ax2.plot(table[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'})")
        ax2.set(xlabel="position", ylabel="value", title="PE(pos, dim) for a few dimensions")
        ax2.legend()
        fig.tight_layout()
        return _save(fig, path, "positions.png")


def plot_attention(path: str | Path, weights: Tensor, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                   title: str = "cross-attention") -> Path:
    """weights (h, L_tgt, L_src) or (L_tgt, L_src): one heatmap per head (first 8) plus their mean."""
    w = weights.float().cpu()
    if w.dim() == 2:
        w = w[None]
    heads = [w.mean(0)] + list(w[:8])
    labels = ["mean of heads"] + [f"head {i}" for i in range(min(8, w.size(0)))]
    cols = min(3, len(heads))
    rows = (len(heads) + cols - 1) // cols
    with chinese_text():
        fig, axes = plt.subplots(rows, cols, figsize=(4.5 * cols, 4 * rows), squeeze=False)
        for ax, m, label in zip(axes.flat, heads, labels):
            ax.imshow(m.numpy(), cmap="viridis", aspect="auto")
            ax.set_xticks(range(len(src_tokens)), src_tokens, rotation=90, fontsize=7)
            ax.set_yticks(range(len(tgt_tokens)), tgt_tokens, fontsize=7)
            ax.set_title(label)
        for ax in list(axes.flat)[len(heads):]:
            ax.axis("off")
        fig.suptitle(title)
        fig.tight_layout()
        return _save(fig, path, "attention.png")


def plot_curves(path: str | Path, records: Sequence[dict], title: str = "training") -> Path:
    """Training loss per step and validation loss / BLEU from metrics.jsonl records."""
    train = [(r["step"], r["loss"]) for r in records if r.get("kind") == "train"]
    valid = [(r["step"], r["valid_loss"]) for r in records if r.get("kind") == "valid"]
    bleu = [(r["step"], r["bleu"]) for r in records if r.get("kind") == "valid" and r.get("bleu") is not None]
    with chinese_text():  # the title names the corpus, which may be Chinese
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
        return _save(fig, path, "curve.png")

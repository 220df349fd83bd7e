"""Pictures: positional encodings (heatmap and sine curves), attention heatmaps, training curves.

matplotlib with the headless Agg backend: files only, no screen needed. Every figure is drawn and saved inside
`fonts.chinese_text()`, so Chinese labels get real glyphs (inspect/fonts.py).
"""

from __future__ import annotations

import math
import textwrap
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


def default_dims(d_model: int) -> list[int]:
    """Four sine dimensions from fast to slow (0, D/8, D/4, D/2, rounded down to even): what seed 000 teaches,
    low dimensions oscillate fast and high ones slowly."""
    return sorted({min(2 * (d_model // k // 2), d_model - 2) for k in (8, 4, 2)} | {0})


def check_dims(dims: Sequence[int], d_model: int) -> list[int]:
    """`dims` as a list, or a one-line InputError naming the first dimension outside [0, d_model)."""
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise InputError(f"--dims {bad[0]}: outside the {d_model} dimensions (0 to {d_model - 1})")
    if not dims:
        raise InputError("--dims: give at least one dimension, e.g. --dims 0,1,20,21")
    return list(dims)


def plot_positions(path: str | Path, d_model: int = 128, max_len: int = 100,
                   dims: Sequence[int] | None = None) -> Path:
    """Left: the (position x dimension) heatmap of PE. Right: `dims` as curves over position (default
    `default_dims`), each labelled with its wavelength 2 pi 10000^(2i/D).

    Returns the file written (DIR/positions.png for a directory)."""
    check_position_sizes(d_model, max_len)
    table = sinusoid_table(max_len, d_model).numpy()
    dims = check_dims(default_dims(d_model) if dims is None else dims, d_model)
    with chinese_text():
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(13, 4.5))
        im = ax1.imshow(table, aspect="auto", cmap="RdBu", vmin=-1, vmax=1)
        ax1.set(xlabel="embedding dimension", ylabel="position", title=f"sinusoidal PE (d_model={d_model})")
        fig.colorbar(im, ax=ax1)
        for d in dims:
            wavelength = 2 * math.pi * 10000 ** ((d - d % 2) / d_model)
            ax2.plot(table[:, d], label=f"dim {d} ({'sin' if d % 2 == 0 else 'cos'}, wavelength {wavelength:.3g})")
        ax2.set(xlabel="position", ylabel="value", title="PE(pos, dim): low dimensions fast, high ones slow")
        ax2.legend(fontsize=8, loc="lower left")
        fig.tight_layout()
        return _save(fig, path, "positions.png")


def plot_attention(path: str | Path, weights: Tensor, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                   title: str = "cross-attention") -> Path:
    """weights (h, L_tgt, L_src) or (L_tgt, L_src): one heatmap per head (first 8) plus their mean."""
    w = weights.float().cpu()
    if w.dim() == 2:
        w = w[None]
    heads = [w.mean(0)] + list(w[:8])
    labels = ["mean of heads"] + [f"head {i + 1}" for i in range(min(8, w.size(0)))]  # 1-based, as --head
    cols = min(3, len(heads))
    rows = (len(heads) + cols - 1) // cols
    panels = [heads[r * cols : (r + 1) * cols] for r in range(rows)]
    names = [labels[r * cols : (r + 1) * cols] for r in range(rows)]
    return plot_attention_grid(path, panels, src_tokens, tgt_tokens, names, title)


def plot_attention_grid(path: str | Path, rows: Sequence[Sequence[Tensor]], keys: Sequence[str],
                        queries: Sequence[str], names: Sequence[Sequence[str]], title: str,
                        default_name: str = "attention.png") -> Path:
    """Heatmaps in a grid: rows[r][c] is one (L_q, L_k) matrix named names[r][c], keys on the x axis, queries on
    the y axis, one colour bar (0 to the largest weight shown) for all. Returns the file written."""
    cols = max(len(r) for r in rows)
    top = max(float(m.max()) for r in rows for m in r) or 1.0
    fontsize = 7 if max(len(keys), len(queries)) <= 30 else 5
    with chinese_text():
        width = max(3.6 * cols + 1, 6.0)
        fig, axes = plt.subplots(len(rows), cols, figsize=(width, 3.3 * len(rows) + 0.8), squeeze=False)
        image = None
        for ax_row, row, row_names in zip(axes, rows, names):
            for ax, m, name in zip(ax_row, row, row_names):
                image = ax.imshow(m.float().cpu().numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=top)
                ax.set_xticks(range(len(keys)), keys, rotation=90, fontsize=fontsize)
                ax.set_yticks(range(len(queries)), queries, fontsize=fontsize)
                ax.set_title(name, fontsize=9)
            for ax in ax_row[len(row):]:
                ax.axis("off")
        fig.suptitle(textwrap.fill(title, int(width * 9)))  # a long sentence wraps instead of running off the page
        fig.tight_layout()
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label="attention weight")
        return _save(fig, path, default_name)


def plot_curves(path: str | Path, records: Sequence[dict], title: str = "training") -> Path:
    """Training loss per step and validation loss / BLEU from metrics.jsonl records."""
    train = [(r["step"], r["loss"]) for r in records if r.get("kind") == "train" and r.get("loss") is not None]
    valid = [(r["step"], r["valid_loss"]) for r in records if r.get("kind") == "valid"
             and r.get("valid_loss") is not None]  # a record without its number is no point (runs/metrics.py)
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

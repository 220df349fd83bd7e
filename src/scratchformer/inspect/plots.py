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

from scratchformer.errors import N_, InputError  # noqa: E402
from scratchformer.i18n import _  # noqa: E402
from scratchformer.inspect.fonts import chinese_text  # noqa: E402
from scratchformer.model.embedding import sinusoid_table  # noqa: E402
from scratchformer.runs.files import atomic_path  # noqa: E402
from scratchformer.runs.names import CURVE  # noqa: E402


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
        with atomic_path(out) as tmp:  # whole or not at all; the format is the real name's, not the temporary's
            fig.savefig(tmp, dpi=110, format=out.suffix[1:] or "png")
    finally:
        plt.close(fig)
    return out


def check_position_sizes(d_model: int, max_len: int, flags: dict[str, str] | None = None) -> None:
    """One-line InputError unless d_model is even and >= 2 and max_len >= 1; `flags` names them for a CLI."""
    flags = {"d_model": "d_model", "max_len": "max_len", **(flags or {})}
    if d_model < 2 or d_model % 2:
        raise InputError(N_("{flag} {value}: sinusoidal positions need an even d_model >= 2 (a sin and a cos per "
                            "frequency)"), flag=flags["d_model"], value=d_model)
    if max_len < 1:
        raise InputError(N_("{flag} {value}: give at least one position"), flag=flags["max_len"], value=max_len)


def default_dims(d_model: int) -> list[int]:
    """Four sine dimensions from fast to slow (0, D/8, D/4, D/2, rounded down to even): low dimensions oscillate
    fast and high ones slowly, the wavelength 2 pi 10000^(2i/D) growing with i. Seed 000 says the opposite (low
    slow, high fast); docs/seed-errata.md corrects it."""
    return sorted({min(2 * (d_model // k // 2), d_model - 2) for k in (8, 4, 2)} | {0})


def check_dims(dims: Sequence[int], d_model: int) -> list[int]:
    """`dims` as a list, or a one-line InputError naming the first dimension outside [0, d_model)."""
    bad = [d for d in dims if not 0 <= d < d_model]
    if bad:
        raise InputError(N_("--dims {bad}: outside the {d_model} dimensions (0 to {value})"), bad=bad[0],
                         d_model=d_model, value=d_model - 1)
    if not dims:
        raise InputError(N_("--dims: give at least one dimension, e.g. --dims 0,1,20,21"))
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
        ax1.set(xlabel=_("embedding dimension"), ylabel=_("position"),
                title=_("sinusoidal PE (d_model={d_model})").format(d_model=d_model))
        fig.colorbar(im, ax=ax1)
        for d in dims:
            wavelength = 2 * math.pi * 10000 ** ((d - d % 2) / d_model)
            ax2.plot(table[:, d], label=_("dim {d} ({fn}, wavelength {wavelength:.3g})").format(
                d=d, fn="sin" if d % 2 == 0 else "cos", wavelength=wavelength))
        ax2.set(xlabel=_("position"), ylabel=_("value"), title=_("PE(pos, dim): low dimensions fast, high ones slow"))
        ax2.legend(fontsize=8, loc="lower left")
        fig.tight_layout()
        return _save(fig, path, "positions.png")


def plot_attention(path: str | Path, weights: Tensor, src_tokens: Sequence[str], tgt_tokens: Sequence[str],
                   title: str | None = None) -> Path:
    """weights (h, L_tgt, L_src) or (L_tgt, L_src): one heatmap per head (first 8) plus their mean."""
    w = weights.float().cpu()
    if w.dim() == 2:
        w = w[None]
    heads = [w.mean(0)] + list(w[:8])
    labels = [_("mean of heads")] + [_("head {n}").format(n=i + 1) for i in range(min(8, w.size(0)))]  # as --head
    cols = min(3, len(heads))
    rows = (len(heads) + cols - 1) // cols
    panels = [heads[r * cols : (r + 1) * cols] for r in range(rows)]
    names = [labels[r * cols : (r + 1) * cols] for r in range(rows)]
    return plot_attention_grid(path, panels, src_tokens, tgt_tokens, names, title or _("cross-attention"))


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
        fig.colorbar(image, ax=axes.ravel().tolist(), shrink=0.8, label=_("attention weight"))
        return _save(fig, path, default_name)


def plot_curves(path: str | Path, records: Sequence[dict], title: str = "",
                earlier: Sequence[dict] = ()) -> Path:
    """Training loss per step (raw, and its running mean over 20 logs) with the validation loss beside it on the
    same axis, validation BLEU on a second axis; from metrics.jsonl records. `earlier`: an earlier phase's records
    (the shipped model's metrics-base.jsonl, before fine-tuning), drawn first, the later steps shifted after it."""
    offset = max((r["step"] for r in earlier if isinstance(r.get("step"), int)), default=0)
    phases = [(earlier, 0, _("phase 1")), (records, offset, _("phase 2"))] if earlier else [(records, 0, "")]
    with chinese_text():  # the title names the corpus, which may be Chinese
        fig, ax = plt.subplots(figsize=(8, 4.5))
        ax2 = None
        for recs, shift, phase in phases:
            tag = f"{phase}: " if phase else ""
            # a record without its number is no point (runs/metrics.py)
            train = [(r["step"] + shift, r["loss"]) for r in recs if r.get("kind") == "train"
                     and r.get("loss") is not None]
            valid = [(r["step"] + shift, r["valid_loss"]) for r in recs if r.get("kind") == "valid"
                     and r.get("valid_loss") is not None]
            bleu = [(r["step"] + shift, r["bleu"]) for r in recs
                    if r.get("kind") == "valid" and r.get("bleu") is not None]
            if train:
                line, = ax.plot(*zip(*train), label=tag + _("train loss"), alpha=0.35)
                ys = [y for _step, y in train]
                mean = [sum(ys[max(0, i - 19): i + 1]) / len(ys[max(0, i - 19): i + 1]) for i in range(len(ys))]
                ax.plot([x for x, _y in train], mean, color=line.get_color(), label=tag + _("train loss, running mean"))
            if valid:
                ax.plot(*zip(*valid), "o-", label=tag + _("validation loss"))
            if bleu:
                ax2 = ax2 or ax.twinx()
                ax2.plot(*zip(*bleu), "s--", color="tab:green", label=tag + _("validation BLEU"))
        if offset:
            ax.axvline(offset, color="gray", ls=":")
        if not any(r.get("kind") == "valid" for recs, _s, _p in phases for r in recs):
            ax.text(0.5, 0.95, _("no validation records in this run's log"), transform=ax.transAxes, ha="center",
                    va="top", color="gray")
        ax.set(xlabel=_("optimiser step"), ylabel=_("loss (label-smoothed CE)"), title=title or _("training"))
        ax.legend(loc="upper right", fontsize=8)
        if ax2 is not None:
            ax2.set_ylabel("BLEU")
            ax2.legend(loc="center right", fontsize=8)
        fig.tight_layout()
        return _save(fig, path, CURVE)


def position_relations(d_model: int = 128, max_len: int = 100) -> dict[str, list[float]]:
    """Seed 003's two PE properties, measured. "dot": PE(p) . PE(p+k) for k = 0..max_len-1 (mean over p), which
    is sum_i cos(k w_i): it falls as k grows. "linear_error": the largest |R_k PE(p) - PE(p+k)| over p, where R_k
    rotates each (sin, cos) pair by k w_i, the same matrix for every p: PE(p+k) is a linear function of PE(p)."""
    import torch

    check_position_sizes(d_model, max_len)
    pe = sinusoid_table(2 * max_len, d_model).double()  # (2 max_len, D)
    w = 1.0 / 10000 ** (torch.arange(0, d_model, 2, dtype=torch.float64) / d_model)  # (D/2,)
    dots, errors = [], []
    for k in range(max_len):
        dots.append(float((pe[:max_len] * pe[k: k + max_len]).sum(-1).mean()))
        sin, cos = pe[:max_len, 0::2], pe[:max_len, 1::2]  # (max_len, D/2) each
        c, s = torch.cos(k * w), torch.sin(k * w)
        rotated = torch.stack([sin * c + cos * s, cos * c - sin * s], dim=-1).flatten(1)  # sin(a+b), cos(a+b)
        errors.append(float((rotated - pe[k: k + max_len]).abs().max()))
    return {"dot": dots, "linear_error": errors}


def plot_position_relations(path: str | Path, d_model: int = 128, max_len: int = 100) -> Path:
    """Left: PE(p) . PE(p+k) against the distance k. Right: how exactly a fixed rotation R_k maps PE(p) to
    PE(p+k). Returns the file written (DIR/position-relations.png for a directory)."""
    r = position_relations(d_model, max_len)
    with chinese_text():
        fig, (ax1, ax2) = plt.subplots(1, 2, figsize=(12, 4))
        ax1.plot(r["dot"])
        ax1.set(xlabel=_("distance k"), ylabel="PE(p) . PE(p+k)",
                title=_("the dot product falls with distance (d_model={d_model})").format(d_model=d_model))
        ax2.plot([max(e, 1e-17) for e in r["linear_error"]])
        ax2.set(yscale="log", xlabel=_("distance k"), ylabel="max |R_k PE(p) - PE(p+k)|",
                title=_("PE(p+k) is a rotation of PE(p), the same for every p"))
        fig.tight_layout()
        return _save(fig, path, "position-relations.png")

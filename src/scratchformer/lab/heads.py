"""Lab `heads`: do the heads learn different patterns? (seed 003's Socratic question on multi-head attention)

On the shipped models/en-zh (3 + 3 layers of 4 heads), for test sentences teacher-forced on their references:
  - the entropy of each head's attention (nats, averaged over queries): low = it looks at few tokens;
  - the mean attention distance of each self-attention head, sum_j w_ij |i - j|: small = it looks nearby;
  - the BLEU lost when one head is masked out: a forward pre-hook on the attention's output projection W^O
    zeroes that head's slice of Concat(head_1, ..., head_h) (model/attention.py, `self.w_o(merge_heads(out))`),
    so the model is not edited; greedy decoding on a slice of the test split.
The picture ends with a grid of heatmaps of one sentence: the first and last layer of every kind of attention.
"""

from __future__ import annotations

from contextlib import contextmanager
from pathlib import Path
from typing import Any

import torch
from torch import Tensor, nn

from scratchformer.data.corpus import load_pairs
from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.engines import Translator
from scratchformer.errors import N_, InputError
from scratchformer.evaluation.metrics import bleu
from scratchformer.i18n import _
from scratchformer.inspect.fonts import chinese_text
from scratchformer.lab.common import Result, save_figure
from scratchformer.model.attention import MultiHeadAttention
from scratchformer.runs import load_run, names

SHIPPED = Path(__file__).resolve().parents[3] / "models" / "en-zh"  # the repository's models/en-zh
KINDS = ("encoder self", "decoder self", "cross")


def attention_modules(model: nn.Module) -> dict[str, list[MultiHeadAttention]]:
    """kind -> the MultiHeadAttention of each layer, first layer first."""
    return {"encoder self": [layer.self_attn for layer in model.encoder.layers],
            "decoder self": [layer.self_attn for layer in model.decoder.layers],
            "cross": [layer.cross_attn for layer in model.decoder.layers]}


@contextmanager
def masked(heads: list[tuple[MultiHeadAttention, int]]):
    """Inside the block, each (attention, head) pair's slice of the concatenated heads is zero before W^O."""
    def hook_for(head: int, d_v: int):
        def pre_hook(_module: nn.Module, args: tuple) -> tuple:
            x = args[0].clone()  # (B, L, h*d_v): the heads side by side
            x[..., head * d_v:(head + 1) * d_v] = 0
            return (x, *args[1:])
        return pre_hook

    handles = [mha.w_o.register_forward_pre_hook(hook_for(head, mha.d_v)) for mha, head in heads]
    try:
        yield
    finally:
        for handle in handles:
            handle.remove()


def sentence_weights(run, source: str, reference: str) -> tuple[dict[str, list[Tensor]], list[int], list[int]]:
    """Teacher-force one pair: kind -> per layer weights (h, L_q, L_k); and the source and target ids."""
    model = run.model
    src_ids = run.src_tok.encode(source)[: model.config.max_positions - 1] + [EOS_ID]
    tgt_ids = [BOS_ID] + run.tgt_tok.encode(reference)[: model.config.max_positions - 2]
    mods = attention_modules(model)
    model.keep_attention_weights(True)
    try:
        with torch.no_grad():
            model(torch.tensor([src_ids]), torch.tensor([tgt_ids]))
        weights = {kind: [m.attention.last_weights[0] for m in layers] for kind, layers in mods.items()}
    finally:
        model.keep_attention_weights(False)
    return weights, src_ids, tgt_ids


def head_statistics(run, pairs: list[tuple[str, str]]) -> dict[str, dict[str, list[list[float]]]]:
    """kind -> {"entropy": [layer][head], "distance": [layer][head] (self-attention only)}, means over pairs."""
    sums: dict[str, dict[str, Tensor]] = {}
    for source, reference in pairs:
        weights, _, _ = sentence_weights(run, source, reference)
        for kind, layers in weights.items():
            w = torch.stack(layers)  # (layers, h, L_q, L_k)
            entropy = -(w * w.clamp_min(1e-12).log()).sum(-1).mean(-1)  # (layers, h)
            stats = {"entropy": entropy}
            if kind != "cross":
                i = torch.arange(w.size(-2))[:, None]
                j = torch.arange(w.size(-1))[None, :]
                stats["distance"] = (w * (i - j).abs()).sum(-1).mean(-1)  # (layers, h)
            for key, value in stats.items():
                sums.setdefault(kind, {}).setdefault(key, torch.zeros_like(value))
                sums[kind][key] += value
    return {kind: {key: (v / len(pairs)).tolist() for key, v in d.items()} for kind, d in sums.items()}


def masked_bleu(run, pairs: list[tuple[str, str]], kinds: tuple[str, ...]) -> dict[str, object]:
    """BLEU of greedy translations: unmasked, each head of `kinds` masked alone, and each kind masked whole. The run's
    decoding.json at beam 1, on the eager step (it calls W^O, so it sees the masks' hooks)."""
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator(run, run.decoding.pick(beam=1, step="eager"))

    def score() -> float:
        return float(bleu(translator.translate(sources), refs)["score"])

    mods = attention_modules(run.model)
    result: dict[str, object] = {"baseline": score(), "per_head": {}, "whole_kind": {}}
    for kind in kinds:
        table = []
        for mha in mods[kind]:
            row = []
            for head in range(mha.h):
                with masked([(mha, head)]):
                    row.append(score())
            table.append(row)
        result["per_head"][kind] = table
        with masked([(mha, h) for mha in mods[kind] for h in range(mha.h)]):
            result["whole_kind"][kind] = score()
    return result


def _matrix(ax, values: list[list[float]], title: str, cmap: str, fig, fmt: str = "{:.2f}") -> None:
    m = torch.tensor(values)
    im = ax.imshow(m, cmap=cmap, aspect="auto")
    for (r, c), v in zip(((r, c) for r in range(m.size(0)) for c in range(m.size(1))), m.flatten().tolist()):
        ax.text(c, r, fmt.format(v), ha="center", va="center", fontsize=7, color="white")
    ax.set(xlabel=_("head"), ylabel=_("layer"), title=title)
    ax.set_xticks(range(m.size(1)), [str(i + 1) for i in range(m.size(1))])
    ax.set_yticks(range(m.size(0)), [str(i + 1) for i in range(m.size(0))])
    fig.colorbar(im, ax=ax)


def draw(out: Path, stats: dict, drops: dict, example: tuple, run) -> Path:
    """Top: entropy, distance and BLEU lost per head; below: one sentence's heatmaps (first and last layers)."""
    import matplotlib.pyplot as plt  # late: matplotlib takes a second to import

    weights, src_ids, tgt_ids = example
    src_labels = [run.src_tok.decode([i]) or "·" for i in src_ids[:-1]] + ["</s>"]
    tgt_labels = ["<s>"] + [run.tgt_tok.decode([i]) or "·" for i in tgt_ids[1:]]
    labels = {"encoder self": (src_labels, src_labels), "decoder self": (tgt_labels, tgt_labels),
              "cross": (tgt_labels, src_labels)}
    n_layers = len(weights["cross"])
    shown = sorted({0, n_layers - 1})
    n_heads = weights["cross"][0].size(0)
    rows = 2 + len(KINDS) * len(shown)
    with chinese_text():
        fig = plt.figure(figsize=(4 * n_heads, 3.4 * rows))
        grid = fig.add_gridspec(rows, 3 * n_heads)
        per_panel = max(1, n_heads)
        for col, kind in enumerate(KINDS):
            ax = fig.add_subplot(grid[0, col * per_panel:(col + 1) * per_panel])
            _matrix(ax, stats[kind]["entropy"], f"{kind}: entropy (nats)", "viridis", fig)
            ax = fig.add_subplot(grid[1, col * per_panel:(col + 1) * per_panel])
            if kind in drops["per_head"]:
                lost = [[drops["baseline"] - b for b in row] for row in drops["per_head"][kind]]
                _matrix(ax, lost, f"{kind}: BLEU lost when masked (base {drops['baseline']:.1f})", "magma", fig,
                        "{:.1f}")
            elif "distance" in stats[kind]:
                _matrix(ax, stats[kind]["distance"], f"{kind}: mean distance |i-j|", "cividis", fig)
            else:
                ax.axis("off")
        row = 2
        for kind in KINDS:
            ys, xs = labels[kind]
            for layer in shown:
                for head in range(n_heads):
                    ax = fig.add_subplot(grid[row, head * 3:(head + 1) * 3])
                    ax.imshow(weights[kind][layer][head].numpy(), cmap="viridis", aspect="auto", vmin=0, vmax=1)
                    ax.set_xticks(range(len(xs)), xs, rotation=90, fontsize=6)
                    ax.set_yticks(range(len(ys)), ys, fontsize=6)
                    ax.set_title(f"{kind}, layer {layer + 1}, head {head + 1}", fontsize=9)
                row += 1
        fig.tight_layout()
        return save_figure(fig, out, "heads")


def run(out: Path, quick: bool = False, run_dir: str | Path | None = None) -> Result:
    """Statistics, masked BLEU and the picture for the shipped model (or `run_dir`, an encoder-decoder run)."""
    run_dir = Path(run_dir) if run_dir else SHIPPED
    if not (run_dir / names.CONFIG).exists():
        raise InputError(N_("{run_dir} holds no run: `lab heads` needs an encoder-decoder run (models/en-zh of the "
                            "repository, or --run RUN_DIR)"), run_dir=run_dir)
    loaded = load_run(run_dir)
    if loaded.model_config.arch != "encoder-decoder":
        raise InputError(N_("{run_dir} holds a {arch} model: `lab heads` needs an encoder-decoder"), run_dir=run_dir,
                         arch=loaded.model_config.arch)
    corpus = loaded.train_config.corpus if loaded.train_config else "en-zh"
    pairs = load_pairs(corpus, "test", on_error="skip",
                       holdout=loaded.train_config.holdout if loaded.train_config else "none")
    n_stats, n_bleu = (16, 32) if quick else (100, 200)
    kinds = ("cross",) if quick else KINDS
    stats = head_statistics(loaded, pairs[:n_stats])
    drops = masked_bleu(loaded, pairs[:n_bleu], kinds)
    short = min(pairs[:20], key=lambda p: abs(len(p[0].split()) - 7))  # a sentence of about 7 words
    figure = draw(out, stats, drops, sentence_weights(loaded, *short), loaded)
    numbers = {"run": str(run_dir), "sentences_for_statistics": n_stats, "sentences_for_bleu": n_bleu,
               "statistics": stats, "bleu": drops, "example": {"source": short[0], "reference": short[1]}}
    return Result(numbers, conclude(numbers), figure)


def conclude(numbers: dict[str, Any]) -> str:
    """The conclusion, in the current language, from the numbers alone."""
    stats, drops, n_bleu = numbers["statistics"], numbers["bleu"], numbers["sentences_for_bleu"]
    base = drops["baseline"]
    worst = {kind: max(((layer, head, base - b) for layer, row in enumerate(t) for head, b in enumerate(row)),
                       key=lambda x: x[2]) for kind, t in drops["per_head"].items()}
    spread = {kind: (min(min(r) for r in s["entropy"]), max(max(r) for r in s["entropy"])) for kind, s in stats.items()}
    return _(
        "Entropy of the heads (nats, low = focused): {spread}. Greedy BLEU on {n} test sentences: {base:.1f}; masking "
        "one head costs at most {worst}; masking every head of a kind: {whole}. The heads differ: their entropies "
        "span {spans}."
    ).format(spread="; ".join(f"{kind} {lo:.2f} to {hi:.2f}" for kind, (lo, hi) in spread.items()), n=n_bleu,
             base=base, worst="; ".join(_("{cost:.1f} ({kind}, layer {layer}, head {head})").format(
                 cost=w[2], kind=kind, layer=w[0] + 1, head=w[1] + 1) for kind, w in worst.items()),
             whole="; ".join(f"{kind} -> {b:.1f}" for kind, b in drops["whole_kind"].items()),
             spans=", ".join(_("{span:.2f} nats ({kind})").format(span=hi - lo, kind=kind)
                             for kind, (lo, hi) in spread.items()))

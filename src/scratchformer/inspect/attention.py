"""Attention of one translated sentence, every kind: encoder self-attention, decoder (masked) self-attention and
cross-attention, per layer and head, with the tokens each axis holds; and their heatmaps."""

from __future__ import annotations

from dataclasses import dataclass
from pathlib import Path

import torch
from torch import Tensor

from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.errors import InputError
from scratchformer.i18n import N_, _
from scratchformer.inspect.plots import plot_attention, plot_attention_grid

# kind -> what it is (English; _() where shown); queries attend over keys
KINDS = {"self": N_("encoder self-attention"), "decoder-self": N_("decoder self-attention (masked)"),
         "cross": N_("cross-attention (decoder queries, encoder keys)")}


@dataclass
class AttentionMaps:
    """Every attention of one teacher-forced sentence pair. weights[kind][layer] is (h, L_q, L_k)."""

    weights: dict[str, list[Tensor]]
    src_labels: list[str]  # the source tokens + </s>: the encoder's positions
    tgt_in_labels: list[str]  # <s> + the target tokens: the decoder's inputs (keys of its self-attention)
    tgt_labels: list[str]  # the target tokens + </s>: what each decoder position predicts (its queries)

    def axes(self, kind: str) -> tuple[list[str], list[str]]:
        """(keys, queries) labels of `kind`."""
        if kind == "self":
            return self.src_labels, self.src_labels
        return (self.tgt_in_labels if kind == "decoder-self" else self.src_labels), self.tgt_labels


def attention_maps(run, source: str, translation: str) -> AttentionMaps:
    """Teacher-force `translation` after `source` through the run's model and keep every attention's weights."""
    if not source.strip():
        raise InputError(N_("cannot draw the attention of an empty sentence: give a sentence with words in it"))
    model = run.model
    if not hasattr(model, "encoder") or not hasattr(model, "decoder"):
        raise InputError(N_("{path} holds a {arch} model: attention pictures need a translation (encoder-decoder) "
                            "run"), path=run.path, arch=model.config.arch)
    src_ids = run.src_tok.encode(source)[: model.config.max_positions - 1] + [EOS_ID]
    tgt_ids = run.tgt_tok.encode(translation)[: model.config.max_positions - 1]
    model.keep_attention_weights(True)
    try:
        with torch.no_grad():
            model(torch.tensor([src_ids]), torch.tensor([[BOS_ID] + tgt_ids]))
        weights = {  # [0]: the one sentence of the batch -> (h, L_q, L_k)
            "self": [layer.self_attn.attention.last_weights[0] for layer in model.encoder.layers],
            "decoder-self": [layer.self_attn.attention.last_weights[0] for layer in model.decoder.layers],
            "cross": [layer.cross_attn.attention.last_weights[0] for layer in model.decoder.layers],
        }
    finally:
        model.keep_attention_weights(False)
    tgt_tokens = run.tgt_tok.tokenize(translation)[: len(tgt_ids)]
    return AttentionMaps(weights, run.src_tok.tokenize(source)[: len(src_ids) - 1] + ["</s>"],
                         ["<s>"] + tgt_tokens, tgt_tokens + ["</s>"])


def cross_attention(run, source: str, translation: str, layer: int = -1) -> tuple[Tensor, list, list]:
    """Teacher-force `translation` and return the cross-attention weights (h, L_tgt, L_src) of `layer`."""
    maps = attention_maps(run, source, translation)
    return maps.weights["cross"][layer], maps.src_labels, maps.tgt_labels


def plot_cross_attention(run, source: str, translation: str, path: Path, layer: int = -1) -> Path:
    """The heatmap of `layer`'s cross-attention for one sentence; returns the file written."""
    weights, src_labels, tgt_labels = cross_attention(run, source, translation, layer)
    n_layers = len(run.model.decoder.layers)
    title = _("cross-attention, decoder layer {layer} of {layers}").format(layer=layer % n_layers + 1, layers=n_layers)
    return plot_attention(path, weights, src_labels, tgt_labels, title=title)


def select(maps: AttentionMaps, kind: str, layer: int | None = None, head: int | None = None) -> tuple[
        list[list[Tensor]], list[list[str]]]:
    """The panels of a grid (rows: layers, columns: heads) and their names. layer / head: 1-based, None = all;
    a number out of range is a one-line InputError."""
    if kind not in KINDS:
        raise InputError(N_("--kind {kind}: choose one of {KINDS}"), kind=kind, KINDS=', '.join(KINDS))
    layers = maps.weights[kind]
    n_heads = layers[0].size(0)
    for flag, value, most in (("--layer", layer, len(layers)), ("--head", head, n_heads)):
        if value is not None and not 1 <= value <= most:
            raise InputError(N_("{flag} {value}: the model has {most} ({lstrip}s 1 to {most})"), flag=flag, value=value,
                             most=most, lstrip=flag.lstrip('-'))
    rows, names = [], []
    for i in range(len(layers)) if layer is None else [layer - 1]:
        heads = range(n_heads) if head is None else [head - 1]
        rows.append([layers[i][j] for j in heads])
        names.append([_("layer {layer}, head {head}").format(layer=i + 1, head=j + 1) for j in heads])
    return rows, names


def plot_kind(maps: AttentionMaps, path: str | Path, kind: str = "cross", layer: int | None = None,
              head: int | None = None, title: str = "") -> Path:
    """One kind's heatmaps (layers x heads, or the one asked for), tokens on the axes; returns the file written."""
    rows, names = select(maps, kind, layer, head)
    keys, queries = maps.axes(kind)
    return plot_attention_grid(path, rows, keys, queries, names, title or _(KINDS[kind]),
                               default_name=f"attention-{kind}.png")


def plot_sentence_attention(run, source: str, translation: str, path: str | Path, kind: str = "cross",
                            layer: int | None = None, head: int | None = None) -> Path:
    """Draw `kind` of `source` teacher-forced on `translation`, which the caller made (`plot attention` through
    engines.Translator, or --translation); returns the file written."""
    maps = attention_maps(run, source, translation)
    title = f"{_(KINDS[kind])}: {source} -> {translation}"
    return plot_kind(maps, path, kind, layer, head, title)

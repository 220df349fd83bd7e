"""Cross-attention heatmap of one translated sentence: which source tokens each target token looked at."""

from __future__ import annotations

from pathlib import Path

import torch

from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.errors import InputError
from scratchformer.inspect.plots import plot_attention


def cross_attention(run, source: str, translation: str, layer: int = -1) -> tuple[torch.Tensor, list, list]:
    """Teacher-force `translation` and return the cross-attention weights (h, L_tgt, L_src) of `layer`."""
    if not source.strip():
        raise InputError("cannot draw the attention of an empty sentence: give a sentence with words in it")
    model = run.model
    src_ids = run.src_tok.encode(source)[: model.config.max_len - 1] + [EOS_ID]
    tgt_ids = run.tgt_tok.encode(translation)[: model.config.max_len - 1]
    src = torch.tensor([src_ids])
    tgt_in = torch.tensor([[BOS_ID] + tgt_ids])
    model.keep_attention_weights(True)
    try:
        with torch.no_grad():
            model(src, tgt_in)
        weights = model.decoder.layers[layer].cross_attn.attention.last_weights[0]  # (h, L_tgt, L_src)
    finally:
        model.keep_attention_weights(False)
    src_labels = run.src_tok.tokenize(source)[: len(src_ids) - 1] + ["</s>"]
    tgt_labels = run.tgt_tok.tokenize(translation)[: len(tgt_ids)] + ["</s>"]
    return weights, src_labels, tgt_labels


def plot_cross_attention(run, source: str, translation: str, path: Path, layer: int = -1) -> Path:
    """The heatmap of `layer`'s cross-attention for one sentence; returns the file written."""
    weights, src_labels, tgt_labels = cross_attention(run, source, translation, layer)
    n_layers = len(run.model.decoder.layers)
    title = f"cross-attention, decoder layer {layer % n_layers + 1} of {n_layers}"
    return plot_attention(path, weights, src_labels, tgt_labels, title=title)

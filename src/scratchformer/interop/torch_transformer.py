"""Weights to and from `torch.nn.Transformer`: the proof that our layers compute the same function.

torch packs W^Q, W^K, W^V into `in_proj_weight` (3D, D) in the order q, k, v; our self-attention's
`w_qkv` uses the same layout, and our cross-attention splits it into `w_q` (rows 0:D) and `w_kv` (D:3D).
nn.Transformer always ends both stacks with a LayerNorm, so the matching config has `final_norm=True`.
Embeddings, positions and the generator are ours on both sides: nn.Transformer has none.
"""

from __future__ import annotations

import torch
from torch import nn

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, ConfigError
from scratchformer.model.build import build_model
from scratchformer.model.transformer import EncoderDecoder


def _pairs(model: EncoderDecoder, ref: nn.Transformer) -> list[tuple[torch.Tensor, torch.Tensor]]:
    """(ours, theirs) parameter pairs with identical shapes and meaning."""
    pairs = []

    def attn(ours, theirs):
        if ours.cross:
            d = ours.w_q.out_features
            pairs.extend([(ours.w_q.weight, theirs.in_proj_weight[:d]), (ours.w_q.bias, theirs.in_proj_bias[:d]),
                          (ours.w_kv.weight, theirs.in_proj_weight[d:]), (ours.w_kv.bias, theirs.in_proj_bias[d:])])
        else:
            pairs.extend([(ours.w_qkv.weight, theirs.in_proj_weight), (ours.w_qkv.bias, theirs.in_proj_bias)])
        pairs.extend([(ours.w_o.weight, theirs.out_proj.weight), (ours.w_o.bias, theirs.out_proj.bias)])

    def ffn(ours, theirs):
        pairs.extend([(ours.w_1.weight, theirs.linear1.weight), (ours.w_1.bias, theirs.linear1.bias),
                      (ours.w_2.weight, theirs.linear2.weight), (ours.w_2.bias, theirs.linear2.bias)])

    def norm(ours, theirs):
        pairs.extend([(ours.weight, theirs.weight), (ours.bias, theirs.bias)])

    for ours, theirs in zip(model.encoder.layers, ref.encoder.layers):
        attn(ours.self_attn, theirs.self_attn)
        ffn(ours.feed_forward, theirs)
        norm(ours.sublayer[0].norm, theirs.norm1)
        norm(ours.sublayer[1].norm, theirs.norm2)
    for ours, theirs in zip(model.decoder.layers, ref.decoder.layers):
        attn(ours.self_attn, theirs.self_attn)
        attn(ours.cross_attn, theirs.multihead_attn)
        ffn(ours.feed_forward, theirs)
        for k, their_norm in enumerate((theirs.norm1, theirs.norm2, theirs.norm3)):
            norm(ours.sublayer[k].norm, their_norm)
    norm(model.encoder.norm, ref.encoder.norm)
    norm(model.decoder.norm, ref.decoder.norm)
    return pairs


def _check_compatible(config: ModelConfig) -> None:
    problems = []
    if config.arch != "encoder-decoder":
        problems.append(f"arch={config.arch!r} (need encoder-decoder)")
    if config.norm_placement not in ("post", "pre") or config.norm_kind != "layer":
        problems.append(f"norm_placement={config.norm_placement!r}, norm_kind={config.norm_kind!r} "
                        "(nn.Transformer has post or pre LayerNorm)")
    if not config.use_final_norm:
        problems.append("final_norm is off (nn.Transformer always has final norms: set final_norm=True)")
    if config.head_dim_k * config.n_heads != config.d_model or config.head_dim_v != config.head_dim_k:
        problems.append("h*d_k != d_model or d_v != d_k (nn.MultiheadAttention cannot express that)")
    if config.positions == "rope" or config.kv_heads != config.n_heads:
        problems.append(f"positions={config.positions!r}, n_kv_heads={config.n_kv_heads} (nn.Transformer adds no "
                        "rope and has full heads)")
    if config.activation not in ("relu", "gelu") or not config.bias or config.ffn_kind != "mlp":
        problems.append(f"activation={config.activation!r}, bias={config.bias}, ffn_kind={config.ffn_kind!r}")
    if problems:
        raise ConfigError(N_("config cannot be expressed as {target}: {problems}"), target="torch.nn.Transformer",
                          problems="; ".join(problems))


def to_torch_transformer(model: EncoderDecoder) -> nn.Transformer:
    """A `nn.Transformer(batch_first=True)` holding a copy of our encoder and decoder weights."""
    c = model.config
    _check_compatible(c)
    ref = nn.Transformer(c.d_model, c.n_heads, c.n_encoder_layers, c.n_decoder_layers, c.d_ff, c.dropout,
                         activation=c.activation, layer_norm_eps=c.layer_norm_eps, batch_first=True,
                         norm_first=c.norm_placement == "pre")
    with torch.no_grad():
        for ours, theirs in _pairs(model, ref):
            theirs.copy_(ours)
    return ref


def from_torch_transformer(ref: nn.Transformer, config: ModelConfig) -> EncoderDecoder:
    """Our EncoderDecoder with `ref`'s encoder/decoder weights (embeddings and generator freshly initialised)."""
    config = config.replace(final_norm=True)
    _check_compatible(config)
    model = build_model(config)
    with torch.no_grad():
        for ours, theirs in _pairs(model, ref):
            if ours.shape != theirs.shape:
                raise ConfigError(N_("shape mismatch {shape} vs {shape2}: the config does not match the "
                                     "nn.Transformer's sizes"), shape=tuple(ours.shape), shape2=tuple(theirs.shape))
            ours.copy_(theirs)
    return model

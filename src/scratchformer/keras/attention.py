"""Scaled dot-product attention and multi-head attention in Keras (twin of model/attention.py; Figure 2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shapes: B batch, L_q / L_k query / key length, D d_model, h heads, d_k / d_v per-head widths.
The transpose seed 001 warns about: (B, L, D) -> reshape (B, L, h, d_k) -> transpose (B, h, L, d_k), so that the
matmul of the last two axes runs every head at once; merging undoes both in the reverse order.
Written by hand only (no fused kernel): Keras' own MultiHeadAttention has other weight shapes and mask rules.
"""

from __future__ import annotations

import math
from collections.abc import Iterator
from typing import Any

import keras
from keras import backend, ops

from scratchformer.keras.masks import require_bool

PACKAGE = "scratchformer"
# the most negative finite value per dtype: -inf would give NaN for an all-masked row, -1e9 overflows fp16
_MIN = {"float16": -65504.0, "bfloat16": -3.38953e38, "float32": -3.4028234663852886e38,
        "float64": -1.7976931348623157e308}


def scaled_dot_product_attention(q: Any, k: Any, v: Any, mask: Any = None,
                                 dropout: keras.layers.Layer | None = None, training: bool = False
                                 ) -> tuple[Any, Any]:
    """The reference, by hand. q (B, h, L_q, d_k), k (B, h, L_k, d_k), v (B, h, L_k, d_v), mask broadcastable to
    (B, h, L_q, L_k), True = may attend. Returns (output (B, h, L_q, d_v), weights (B, h, L_q, L_k)). A query
    with no key to attend to gets zero weights and a zero output."""
    scores = ops.matmul(q, ops.swapaxes(k, -2, -1)) / math.sqrt(q.shape[-1])  # (B, h, L_q, L_k)
    if mask is not None:
        require_bool(mask)
        scores = ops.where(mask, scores, _MIN[backend.standardize_dtype(scores.dtype)])
    scores = scores - ops.max(scores, axis=-1, keepdims=True)  # softmax by hand: the largest exponent is 0
    weights = ops.exp(scores) / ops.sum(ops.exp(scores), axis=-1, keepdims=True)  # (B, h, L_q, L_k), rows sum to 1
    if mask is not None:
        weights = ops.where(mask, weights, 0.0)  # exact no-op except on all-masked rows, which become 0
    if dropout is not None:
        weights = dropout(weights, training=training)
    return ops.matmul(weights, v), weights  # (B, h, L_q, d_v), (B, h, L_q, L_k)


def split_heads(x: Any, h: int) -> Any:
    """(B, L, h * d) -> (B, L, h, d) -> (B, h, L, d)"""
    b, l = ops.shape(x)[0], ops.shape(x)[1]
    return ops.transpose(ops.reshape(x, (b, l, h, x.shape[-1] // h)), (0, 2, 1, 3))


def merge_heads(x: Any) -> Any:
    """(B, h, L, d) -> (B, L, h, d) -> (B, L, h * d)"""
    b, l = ops.shape(x)[0], ops.shape(x)[2]
    return ops.reshape(ops.transpose(x, (0, 2, 1, 3)), (b, l, x.shape[1] * x.shape[3]))


def dense(units: int, d_in: int, bias: bool, name: str) -> keras.layers.Dense:
    """A built Dense layer D_in -> units; its kernel is (in, out), the transpose of torch's Linear weight."""
    layer = keras.layers.Dense(units, use_bias=bias, name=name)
    layer.build((None, d_in))
    return layer


def dense_variables(layer: keras.layers.Dense, prefix: str) -> Iterator[tuple[str, Any, bool]]:
    """(torch name, Keras variable, transposed?) of one Dense layer."""
    yield prefix + "weight", layer.kernel, True
    if layer.use_bias:
        yield prefix + "bias", layer.bias, False


@keras.saving.register_keras_serializable(package=PACKAGE)
class MultiHeadAttention(keras.layers.Layer):
    """h heads attending in parallel, then concatenated and projected back to D.

    Self-attention (`cross=False`) projects Q, K, V with one stacked matrix W_qkv = [W^Q; W^K; W^V]; cross-attention
    takes queries from the decoder (W_q) and keys/values from the encoder output "memory" (W_kv), as ours does.
    n_kv_heads = h_kv < h: grouped-query attention, each key/value head shared by h / h_kv query heads."""

    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, n_kv_heads: int | None = None,
                 dropout: float = 0.0, bias: bool = True, cross: bool = False, **kwargs: Any) -> None:
        super().__init__(**kwargs)
        kv = n_kv_heads if n_kv_heads is not None else n_heads
        if kv < 1 or n_heads % kv:
            raise ValueError(f"n_kv_heads={kv} must divide n_heads={n_heads}")
        self.args = dict(d_model=d_model, n_heads=n_heads, d_k=d_k, d_v=d_v, n_kv_heads=n_kv_heads, dropout=dropout,
                         bias=bias, cross=cross)
        self.h, self.h_kv, self.d_k, self.d_v, self.cross = n_heads, kv, d_k, d_v, cross
        if cross:
            self.w_q = dense(n_heads * d_k, d_model, bias, "w_q")  # D -> h*d_k
            self.w_kv = dense(kv * (d_k + d_v), d_model, bias, "w_kv")  # D -> h_kv*(d_k + d_v)
        else:
            self.w_qkv = dense(n_heads * d_k + kv * (d_k + d_v), d_model, bias, "w_qkv")  # D -> h d_k + h_kv(d_k+d_v)
        self.attention_dropout = keras.layers.Dropout(dropout)
        self.w_o = dense(d_model, n_heads * d_v, bias, "w_o")  # h*d_v -> D
        self.built = True

    def call(self, x: Any, memory: Any = None, attn_mask: Any = None, training: bool = False) -> Any:
        # x: (B, L_q, D) queries; memory: (B, L_k, D), the keys/values source of cross-attention; attn_mask: ours,
        # bool, True = may attend (torch's `mask`: in Keras a `mask` argument is its own (B, L) timestep mask)
        hk, kk = self.h * self.d_k, self.h_kv * self.d_k
        if self.cross:
            q = split_heads(self.w_q(x), self.h)  # (B, h, L_q, d_k)
            kv = self.w_kv(memory)  # (B, L_k, h_kv*(d_k + d_v))
            k, v = split_heads(kv[..., :kk], self.h_kv), split_heads(kv[..., kk:], self.h_kv)  # (B, h_kv, L_k, d)
        else:
            qkv = self.w_qkv(x)  # (B, L_q, h d_k + h_kv (d_k + d_v))
            q = split_heads(qkv[..., :hk], self.h)  # (B, h, L_q, d_k)
            k = split_heads(qkv[..., hk: hk + kk], self.h_kv)  # (B, h_kv, L_q, d_k)
            v = split_heads(qkv[..., hk + kk:], self.h_kv)  # (B, h_kv, L_q, d_v)
        if self.h_kv != self.h:  # grouped: each key/value head repeated for its G query heads
            k, v = ops.repeat(k, self.h // self.h_kv, axis=1), ops.repeat(v, self.h // self.h_kv, axis=1)
        out, _ = scaled_dot_product_attention(q, k, v, attn_mask, self.attention_dropout, training)  # (B, h, L_q, d_v)
        return self.w_o(merge_heads(out))  # (B, L_q, h*d_v) -> (B, L_q, D)

    def torch_variables(self, prefix: str) -> Iterator[tuple[str, Any, bool]]:
        for name in ("w_q", "w_kv") if self.cross else ("w_qkv",):
            yield from dense_variables(getattr(self, name), f"{prefix}{name}.")
        yield from dense_variables(self.w_o, prefix + "w_o.")

    def get_config(self) -> dict[str, Any]:
        return {**super().get_config(), **self.args}

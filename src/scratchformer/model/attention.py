"""Scaled dot-product attention and multi-head attention (Figure 2; sections 3.2.1 and 3.2.2).

    Attention(Q, K, V) = softmax(Q K^T / sqrt(d_k)) V
    MultiHead(Q, K, V) = Concat(head_1, ..., head_h) W^O,  head_i = Attention(Q W_i^Q, K W_i^K, V W_i^V)

Shapes: B batch, L_q / L_k query / key length, D d_model, h heads, d_k / d_v per-head widths.
The inner widths h*d_k and h*d_v may differ from D (the paper's Table 3, rows A and B).
Grouped-query attention (GQA, Ainslie et al. 2023; Llama): only h_kv <= h heads of keys and values, each shared by
G = h / h_kv consecutive query heads (h_kv = 1: multi-query attention); the KV cache shrinks by G.

Two paths compute the same numbers: the formula written out by hand (`fused=False`, the reference,
and the one that can return the attention weights for plots) and torch's fused kernel
`F.scaled_dot_product_attention` (`fused=True`, the default for speed). Tests prove they agree.
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn
from torch.nn import functional as F

from scratchformer.model.masks import require_bool

# torch < 2.5 returns NaN from the fused kernel for a query row whose keys are all masked; we zero those rows.
_SDPA_ZEROES_EMPTY_ROWS = tuple(int(p) for p in torch.__version__.split(".")[:2]) >= (2, 5)


def scaled_dot_product_attention(
    q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None, dropout: nn.Module | None = None
) -> tuple[Tensor, Tensor]:
    """The reference, by hand. q (B, h, L_q, d_k), k (B, h, L_k, d_k), v (B, h, L_k, d_v),
    mask broadcastable to (B, h, L_q, L_k), True = may attend. Returns (output (B, h, L_q, d_v),
    weights (B, h, L_q, L_k)). A query with no key to attend to gets zero weights and a zero output."""
    scores = q @ k.transpose(-2, -1) / math.sqrt(q.size(-1))  # (B, h, L_q, L_k)
    if mask is not None:
        # A finite, dtype-aware minimum: -inf would give NaN for an all-masked row, -1e9 overflows fp16.
        scores = scores.masked_fill(~mask, torch.finfo(scores.dtype).min)
    weights = scores.softmax(dim=-1)  # (B, h, L_q, L_k), rows sum to 1
    if mask is not None:
        weights = weights.masked_fill(~mask, 0.0)  # exact no-op except on all-masked rows, which become 0
    if dropout is not None:
        weights = dropout(weights)
    return weights @ v, weights  # (B, h, L_q, d_v), (B, h, L_q, L_k)


class ScaledDotProductAttention(nn.Module):
    """The attention box itself (no parameters): a module so that shape traces and hooks see it."""

    def __init__(self, dropout: float = 0.0, fused: bool = True) -> None:
        super().__init__()
        self.dropout = nn.Dropout(dropout)
        self.fused = fused
        self.keep_weights = False  # set True to keep the last weights (B, h, L_q, L_k) for a heatmap
        self.last_weights: Tensor | None = None

    def forward(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None = None) -> Tensor:
        # q (B, h, L_q, d_k); k, v (B, h_kv, L_k, d): query head i reads key/value head i // (h / h_kv)
        if mask is not None:
            require_bool(mask)  # the fused kernel would ADD a float mask to the scores, silently
        grouped = k.size(1) != q.size(1)
        if self.fused and not self.keep_weights:
            p = self.dropout.p if self.training else 0.0
            out = F.scaled_dot_product_attention(q, k, v, attn_mask=mask, dropout_p=p,
                                                 enable_gqa=grouped)  # (B, h, L_q, d_v)
            if mask is not None and not _SDPA_ZEROES_EMPTY_ROWS:
                out = out.masked_fill(~mask.any(dim=-1, keepdim=True), 0.0)
            return out
        if grouped:  # by hand: each key/value head repeated for its G query heads
            g = q.size(1) // k.size(1)
            k, v = k.repeat_interleave(g, dim=1), v.repeat_interleave(g, dim=1)  # (B, h, L_k, d)
        out, weights = scaled_dot_product_attention(q, k, v, mask, self.dropout)
        if self.keep_weights:
            self.last_weights = weights.detach()
        return out


class KVCache:
    """Keys and values of one attention layer, kept between decoding steps: h_kv heads (n_kv_heads), not h.

    Self-attention appends the new step's keys/values into a preallocated buffer that grows
    geometrically (no reallocation per step). Cross-attention (`static=True`) stores the keys and
    values of the encoder output once per sentence.
    """

    def __init__(self, static: bool = False) -> None:
        self.static = static
        self.k: Tensor | None = None  # (B, h_kv, capacity, d_k)
        self.v: Tensor | None = None  # (B, h_kv, capacity, d_v)
        self.length = 0

    @property
    def nbytes(self) -> int:
        """Bytes of the filled part (capacity aside): B * h_kv * length * (d_k + d_v) * element size."""
        if self.k is None:
            return 0
        k, v = self.k[:, :, : self.length], self.v[:, :, : self.length]
        return k.numel() * k.element_size() + v.numel() * v.element_size()

    def append(self, k: Tensor, v: Tensor) -> tuple[Tensor, Tensor]:
        """Add k (B, h_kv, L_new, d_k), v (B, h_kv, L_new, d_v); return all keys/values so far."""
        n = k.size(2)
        if self.k is None or self.length + n > self.k.size(2):
            capacity = max(2 * (self.length + n), 16)
            new_k = k.new_empty(k.size(0), k.size(1), capacity, k.size(3))
            new_v = v.new_empty(v.size(0), v.size(1), capacity, v.size(3))
            if self.k is not None:
                new_k[:, :, : self.length] = self.k[:, :, : self.length]
                new_v[:, :, : self.length] = self.v[:, :, : self.length]
            self.k, self.v = new_k, new_v
        self.k[:, :, self.length : self.length + n] = k
        self.v[:, :, self.length : self.length + n] = v
        self.length += n
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def set(self, k: Tensor, v: Tensor) -> None:
        self.k, self.v, self.length = k, v, k.size(2)

    def get(self) -> tuple[Tensor, Tensor]:
        return self.k[:, :, : self.length], self.v[:, :, : self.length]

    def reorder(self, index: Tensor, spare: tuple[Tensor, Tensor] | None = None) -> tuple[Tensor, Tensor] | None:
        """Keep batch rows `index` (B',): beam search reorders hypotheses, finished sentences drop out.

        The filled part is gathered straight into `spare` buffers (k, v) of the same shape when given: no
        allocation (fresh multi-MB buffers cost page faults at every step of a beam search) and no temporary.
        Returns the buffers this cache no longer needs, to serve as the next layer's spare (DecoderCache.reorder
        passes them along, so one spare pair serves every layer)."""
        if self.k is None:
            return spare
        if self.static:  # written once, exactly filled
            self.k, self.v = self.k.index_select(0, index), self.v.index_select(0, index)
            return spare
        n = self.length  # gather only the filled part; keep the capacity so appends stay allocation-free
        k_shape = (index.numel(), *self.k.shape[1:])  # (B', h, capacity, d_k)
        v_shape = (index.numel(), *self.v.shape[1:])  # (B', h, capacity, d_v)
        if spare is None or spare[0].shape != k_shape or spare[1].shape != v_shape:
            spare = (self.k.new_empty(k_shape), self.v.new_empty(v_shape))
        k, v = spare
        torch.index_select(self.k[:, :, :n], 0, index, out=k[:, :, :n])
        torch.index_select(self.v[:, :, :n], 0, index, out=v[:, :, :n])
        old, (self.k, self.v) = (self.k, self.v), (k, v)
        return old if old[0].shape == k_shape else None  # same shape: the next layer's spare


def split_heads(x: Tensor, h: int) -> Tensor:
    """(B, L, h * d) -> (B, h, L, d)"""
    b, l, _ = x.shape
    return x.view(b, l, h, -1).transpose(1, 2)


def merge_heads(x: Tensor) -> Tensor:
    """(B, h, L, d) -> (B, L, h * d)"""
    b, h, l, d = x.shape
    return x.transpose(1, 2).reshape(b, l, h * d)


class MultiHeadAttention(nn.Module):
    """h heads attending in parallel, then concatenated and projected back to D.

    Self-attention (`cross=False`) projects Q, K, V from the same input with one stacked matrix
    W_qkv = [W^Q; W^K; W^V] (one matmul instead of three). Cross-attention (`cross=True`) takes
    queries from the decoder and keys/values from the encoder output ("memory"): W_q and W_kv.
    n_kv_heads = h_kv < h: grouped-query attention (W^K and W^V have h_kv heads). rope: a RotaryEmbedding
    (model/rope.py) that turns q and k by their positions before they meet (self-attention only).
    """

    # One by one, keyword-only: the paper's names (d_model, h, d_k, d_v; 3.2.2) as the seeds' box takes them.
    def __init__(self, *, d_model: int, n_heads: int, d_k: int, d_v: int, n_kv_heads: int | None = None,
                 dropout: float = 0.0, bias: bool = True, cross: bool = False, fused: bool = True,
                 rope: nn.Module | None = None) -> None:
        super().__init__()
        kv = n_kv_heads if n_kv_heads is not None else n_heads
        if kv < 1 or n_heads % kv:
            raise ValueError(f"n_kv_heads={kv} must divide n_heads={n_heads}")
        self.h, self.h_kv, self.d_k, self.d_v, self.cross = n_heads, kv, d_k, d_v, cross
        if cross:
            self.w_q = nn.Linear(d_model, n_heads * d_k, bias=bias)  # D -> h*d_k
            self.w_kv = nn.Linear(d_model, kv * (d_k + d_v), bias=bias)  # D -> h_kv*(d_k + d_v)
        else:
            self.w_qkv = nn.Linear(d_model, n_heads * d_k + kv * (d_k + d_v), bias=bias)  # D -> h d_k + h_kv(d_k+d_v)
        self.rope = rope
        self.attention = ScaledDotProductAttention(dropout, fused)
        self.w_o = nn.Linear(n_heads * d_v, d_model, bias=bias)  # h*d_v -> D

    def _project_kv(self, memory: Tensor) -> tuple[Tensor, Tensor]:
        k, v = self.w_kv(memory).split([self.h_kv * self.d_k, self.h_kv * self.d_v], dim=-1)
        return split_heads(k, self.h_kv), split_heads(v, self.h_kv)  # (B, h_kv, L_k, d_k), (B, h_kv, L_k, d_v)

    def _project_qkv(self, x: Tensor) -> tuple[Tensor, Tensor, Tensor]:
        qkv = self.w_qkv(x)  # (B, L_q, h d_k + h_kv (d_k + d_v))
        if self.d_k == self.d_v and self.h_kv == self.h:  # one view for all three: fewer ops per decoding step
            b, l, _ = qkv.shape
            q, k, v = qkv.view(b, l, 3, self.h, self.d_k).permute(2, 0, 3, 1, 4).unbind(0)  # 3 x (B, h, L_q, d_k)
            return q, k, v
        hk, kk, kv = self.h * self.d_k, self.h_kv * self.d_k, self.h_kv * self.d_v
        q, k, v = qkv.split([hk, kk, kv], dim=-1)  # (B, L_q, h*d_k), (B, L_q, h_kv*d_k), (B, L_q, h_kv*d_v)
        return split_heads(q, self.h), split_heads(k, self.h_kv), split_heads(v, self.h_kv)

    def forward(self, x: Tensor, memory: Tensor | None = None, mask: Tensor | None = None,
                cache: KVCache | None = None, positions: Tensor | None = None) -> Tensor:
        # x: (B, L_q, D) queries; memory: (B, L_k, D) keys/values source for cross-attention;
        # positions: (B|1, L_q) of the queries, for rope (None: L_past, L_past + 1, ...)
        if self.cross:
            q = split_heads(self.w_q(x), self.h)  # (B, h, L_q, d_k)
            if cache is not None and cache.k is not None:
                k, v = cache.get()  # computed once per sentence
            else:
                k, v = self._project_kv(memory)
                if cache is not None:
                    cache.set(k, v)
            if k.size(0) != q.size(0):  # beam search: R = B / B_mem rows (beams) share one memory row
                return self._beams_share_memory(q, k, v, mask)
        else:
            q, k, v = self._project_qkv(x)  # (B, h, L_q, d_k), (B, h_kv, L_q, d_k), (B, h_kv, L_q, d_v)
            if self.rope is not None:
                q, k = self.rope(q, k, positions, cache.length if cache is not None else 0)
            if cache is not None:
                k, v = cache.append(k, v)  # (B, h_kv, L_past + L_q, d)
        out = self.attention(q, k, v, mask)  # (B, h, L_q, d_v)
        return self.w_o(merge_heads(out))  # (B, L_q, h*d_v) -> (B, L_q, D)

    def _beams_share_memory(self, q: Tensor, k: Tensor, v: Tensor, mask: Tensor | None) -> Tensor:
        """Cross-attention where R consecutive query rows (the beams of one sentence) share one row of keys and
        values: the R rows attend as R * L_q queries of that row, so the encoder keys/values are neither
        copied per beam nor read R times. q (B_mem*R, h, L_q, d_k), k/v (B_mem, h_kv, L_k, d),
        mask (B_mem, 1, 1, L_k)."""
        b_mem, (b, h, l_q, _) = k.size(0), q.shape
        r = b // b_mem
        q = q.view(b_mem, r, h, l_q, -1).transpose(1, 2).reshape(b_mem, h, r * l_q, -1)  # (B_mem, h, R*L_q, d_k)
        out = self.attention(q, k, v, mask)  # (B_mem, h, R*L_q, d_v)
        out = out.view(b_mem, h, r, l_q, -1).transpose(1, 2).reshape(b, h, l_q, -1)  # (B, h, L_q, d_v)
        return self.w_o(merge_heads(out))  # (B, L_q, D)

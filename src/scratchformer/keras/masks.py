"""Masks in Keras (twin of model/masks.py): which key positions each query may attend to.

One convention everywhere, ours: a boolean tensor, True = "may attend", broadcastable to (B, h, L_q, L_k).
Seed 001 builds float masks with 1 = masked and adds `mask * -1e9` to the scores; we never do (-1e9 overflows
fp16, and a 0/1 float mask is read one way or the other silently), so a non-boolean mask is refused.

    padding_mask(ids, pad_id)   (B, 1, 1, L_k)   hides padding keys       (encoder, cross-attention)
    causal_mask(L_q, L_k)       (1, 1, L_q, L_k) hides future positions   (decoder self-attention)
    combine(a, b)               a & b            both at once             (padded decoder input)
"""

from __future__ import annotations

from typing import Any

from keras import backend, ops

from scratchformer.errors import N_, InputError


def padding_mask(ids: Any, pad_id: int) -> Any:
    """(B, L) token ids -> (B, 1, 1, L): True at real tokens, False at padding."""
    return ops.expand_dims(ops.expand_dims(ops.not_equal(ids, pad_id), 1), 1)


def causal_mask(l_q: Any, l_k: Any = None) -> Any:
    """(1, 1, L_q, L_k) lower-triangular mask, bottom-right aligned: query i sees keys j <= i + L_k - L_q."""
    l_k = l_q if l_k is None else l_k
    i = ops.expand_dims(ops.arange(l_q), 1)  # (L_q, 1)
    j = ops.expand_dims(ops.arange(l_k), 0)  # (1, L_k)
    return ops.expand_dims(ops.expand_dims(ops.less_equal(j, i + (l_k - l_q)), 0), 0)


def combine(*masks: Any) -> Any:
    """Logical AND of the masks that are given (None means "no restriction")."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else ops.logical_and(out, m)
    return out


def require_bool(mask: Any, name: str = "mask") -> None:
    """A one-line InputError unless `mask` is boolean (seed 001's 1 = masked floats would be read backwards)."""
    dtype = backend.standardize_dtype(mask.dtype)
    if dtype != "bool":
        raise InputError(N_("{name} must be a bool tensor, True = may attend; got {dtype} (TensorFlow-style 1 = "
                            "masked? use {name} == 0)"), name=name, dtype=dtype)

"""Masks: which key positions each query may attend to.

One convention everywhere: a boolean tensor, True = "may attend", broadcastable to (B, h, L_q, L_k).

    padding_mask(ids, pad_id)   (B, 1, 1, L_k)   hides padding keys       (encoder, cross-attention)
    causal_mask(L_q, L_k)       (1, 1, L_q, L_k) hides future positions   (decoder self-attention)
    combine(a, b)               a & b            both at once             (padded decoder input)

The causal mask is aligned bottom-right: query i sits at absolute position (L_k - L_q + i), so
a single new query (L_q = 1) against a cache of L_k keys may see all of them. A top-left
alignment would let it see only the first key: the classic KV-cache bug.
"""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.errors import InputError


def padding_mask(ids: Tensor, pad_id: int) -> Tensor:
    """(B, L) token ids -> (B, 1, 1, L): True at real tokens, False at padding."""
    return (ids != pad_id)[:, None, None, :]


def causal_mask(l_q: int, l_k: int | None = None, device: torch.device | str | None = None) -> Tensor:
    """(1, 1, L_q, L_k) lower-triangular mask, bottom-right aligned: query i sees keys j <= i + L_k - L_q."""
    l_k = l_q if l_k is None else l_k
    i = torch.arange(l_q, device=device)[:, None]  # (L_q, 1)
    j = torch.arange(l_k, device=device)[None, :]  # (1, L_k)
    return (j <= i + (l_k - l_q))[None, None]


def combine(*masks: Tensor | None) -> Tensor | None:
    """Logical AND of the masks that are given (None means "no restriction")."""
    out = None
    for m in masks:
        if m is not None:
            out = m if out is None else out & m
    return out


def attention_mask_to_4d(attention_mask: Tensor) -> Tensor:
    """Hugging Face style (B, L) 1/0 mask -> our (B, 1, 1, L) boolean mask."""
    return attention_mask.bool()[:, None, None, :]


def check_mask(mask: Tensor, batch: int, l_q: int, l_k: int, name: str = "mask") -> Tensor:
    """Raise a one-line InputError unless `mask` is broadcastable to (B, h, L_q, L_k); return it as bool 4-D."""
    if mask.dim() == 2 and mask.shape == (batch, l_k):  # (B, L_k): a key padding mask
        mask = mask[:, None, None, :]
    elif mask.dim() == 3 and mask.shape[1:] in ((1, l_k), (l_q, l_k)):  # (B, 1|L_q, L_k)
        mask = mask[:, None]
    ok = mask.dim() == 4 and all(m in (1, want) for m, want in zip(mask.shape, (batch, 1, l_q, l_k)))
    ok = ok and mask.shape[1] == 1
    if not ok:
        raise InputError(
            f"{name} has shape {tuple(mask.shape)}, which does not broadcast to (B={batch}, h, L_q={l_q}, "
            f"L_k={l_k}); give (B, L_k), (B, 1, L_k), (B, L_q, L_k) or (B, 1, L_q, L_k) with True = may attend"
        )
    if mask.dtype != torch.bool:
        mask = mask.bool()
    return mask

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

from scratchformer.errors import N_, InputError


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


def require_bool(mask: Tensor, name: str = "mask") -> None:
    """A one-line InputError unless `mask` is boolean: a 0/1 float or int mask is ambiguous (TensorFlow writes
    1 = masked, the opposite of ours) and would be read silently one way or the other, so it is refused."""
    if mask.dtype != torch.bool:
        raise InputError(N_("{name} must be a bool tensor, True = may attend; got {dtype} (TensorFlow-style 1 = "
                            "masked? use {name} == 0)"), name=name, dtype=mask.dtype)


# Arguments named like Hugging Face's `attention_mask` follow its convention: (B, L) with 1 = real token, 0 =
# padding (the same polarity as ours), so 0/1 integers are accepted there, and only there.
_HF_STYLE = ("attention_mask",)


def _hf_style_to_bool(mask: Tensor, name: str) -> Tensor:
    if mask.dim() != 2 or not bool(((mask == 0) | (mask == 1)).all()):
        raise InputError(N_("{name} of dtype {dtype} must be a (B, L) mask of 0/1 (Hugging Face style, 1 = real "
                            "token), got shape {shape}; or give a bool mask, True = may attend"), name=name,
                         dtype=mask.dtype, shape=tuple(mask.shape))
    return mask != 0


def check_mask(mask: Tensor, batch: int, l_q: int, l_k: int, name: str = "mask") -> Tensor:
    """Raise a one-line InputError unless `mask` is a bool tensor broadcastable to (B, h, L_q, L_k); return it 4-D.

    Only a Hugging Face style `attention_mask` may be 0/1 integers (1 = real token); it is turned into bool."""
    if mask.dtype != torch.bool and name in _HF_STYLE:
        mask = _hf_style_to_bool(mask, name)
    require_bool(mask, name)
    if mask.dim() == 2 and mask.shape == (batch, l_k):  # (B, L_k): a key padding mask
        mask = mask[:, None, None, :]
    elif mask.dim() == 3 and mask.shape[1:] in ((1, l_k), (l_q, l_k)):  # (B, 1|L_q, L_k)
        mask = mask[:, None]
    ok = mask.dim() == 4 and all(m in (1, want) for m, want in zip(mask.shape, (batch, 1, l_q, l_k)))
    ok = ok and mask.shape[1] == 1
    if not ok:
        raise InputError(
            N_("{name} has shape {shape}, which does not broadcast to (B={batch}, h, L_q={l_q}, L_k={l_k}); give "
               "(B, L_k), (B, 1, L_k), (B, L_q, L_k) or (B, 1, L_q, L_k) with True = may attend"), name=name,
            shape=tuple(mask.shape), batch=batch, l_q=l_q, l_k=l_k
        )
    return mask

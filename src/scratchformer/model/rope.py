"""Rotary position embedding (RoPE; Su et al. 2021, "RoFormer"; Llama): positions enter inside attention, not at the
input. Each pair of dimensions (i, i + d/2) of a query or key at position m is turned by the angle m * w_i:

    w_i = theta^(-2i / d)                            i = 0 .. d/2 - 1, theta = rope_theta (10000; Llama 3: 500000)
    rope(x)_m = x_m * cos(m w) + rotate_half(x_m) * sin(m w),   rotate_half([a, b]) = [-b, a]   (halves of d)

so q_m . k_n depends on m - n only. Llama's layout (the halves, not interleaved pairs) and its long-context rule
("llama3" scaling: long wavelengths divided by `factor`, short ones kept, a smooth blend between) are followed, so
Hugging Face Llama weights load unchanged. Applied to q and k after the projections, with the KV-cache offset.
"""

from __future__ import annotations

import math
from typing import Any

import torch
from torch import Tensor, nn

ROPE_TYPES = ("default", "linear", "llama3")  # rope_scaling["rope_type"]


def rope_frequencies(head_dim: int, theta: float = 10000.0, scaling: dict[str, Any] | None = None) -> Tensor:
    """The d/2 angular frequencies w_i (float32), after the scaling rule `scaling` names (Hugging Face's
    rope_parameters: rope_type "default" | "linear" (all divided by factor) | "llama3")."""
    inv_freq = 1.0 / (theta ** (torch.arange(0, head_dim, 2, dtype=torch.int64).float() / head_dim))  # (d/2,)
    kind = (scaling or {}).get("rope_type", "default")
    if kind == "linear":
        return inv_freq / scaling["factor"]
    if kind != "llama3":
        return inv_freq
    factor, low, high = scaling["factor"], scaling["low_freq_factor"], scaling["high_freq_factor"]
    old_len = scaling["original_max_position_embeddings"]
    wavelen = 2 * math.pi / inv_freq  # (d/2,)
    scaled = torch.where(wavelen > old_len / low, inv_freq / factor, inv_freq)  # long waves: divided by factor
    smooth = (old_len / wavelen - low) / (high - low)  # 0 .. 1 between the two wavelengths
    blended = (1 - smooth) * scaled / factor + smooth * scaled
    medium = ~(wavelen < old_len / high) * ~(wavelen > old_len / low)
    return torch.where(medium, blended, scaled)


def rotate_half(x: Tensor) -> Tensor:
    """[a, b] -> [-b, a] over the last dim's two halves."""
    a, b = x.chunk(2, dim=-1)
    return torch.cat((-b, a), dim=-1)


class RotaryEmbedding(nn.Module):
    """rope(q, k, positions, offset) -> q, k turned by their positions; no parameters (the d/2 frequencies are a
    buffer). Each self-attention holds one."""

    def __init__(self, *, head_dim: int, theta: float = 10000.0, scaling: dict[str, Any] | None = None) -> None:
        super().__init__()
        if head_dim % 2:
            raise ValueError(f"rope needs an even head width, got d_k={head_dim}")
        self.register_buffer("inv_freq", rope_frequencies(head_dim, theta, scaling), persistent=False)  # (d/2,)

    def cos_sin(self, positions: Tensor, dtype: torch.dtype) -> tuple[Tensor, Tensor]:
        """positions (B|1, L) -> cos, sin (B|1, 1, L, d), computed in float32 as Llama does."""
        freqs = positions[..., None].float() * self.inv_freq.float()  # (B|1, L, d/2)
        angle = torch.cat((freqs, freqs), dim=-1)[:, None]  # (B|1, 1, L, d)
        return angle.cos().to(dtype), angle.sin().to(dtype)

    def forward(self, q: Tensor, k: Tensor, positions: Tensor | None = None, offset: int = 0) -> tuple[Tensor, Tensor]:
        # q (B, h, L, d), k (B, h_kv, L, d); positions (B|1, L), None -> offset, offset + 1, ... (a KV cache's length)
        if positions is None:
            positions = torch.arange(offset, offset + q.size(2), device=q.device)[None, :]  # (1, L)
        cos, sin = self.cos_sin(positions, q.dtype)
        return q * cos + rotate_half(q) * sin, k * cos + rotate_half(k) * sin

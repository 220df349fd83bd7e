"""Add & Norm (Figure 1): the two norms written by hand, `make_norm`, and the residual sublayer around every box.

    LayerNorm  y = (x - mean) / sqrt(var + eps) * weight + bias, over the last dim (D)   (the paper, BERT, GPT-2)
    RMSNorm    y = x / sqrt(mean(x^2) + eps) * weight, over the last dim (D)             (Llama: no centring, no bias)
    Seed000LayerNorm  y = weight * (x - mean) / (std + eps) + bias, std unbiased (/ (D-1))  (seed 000's own code)
    make_norm  a ModelConfig -> the norm its `norm_kind` names; every norm of a model is built here
    SublayerConnection, by `norm_placement` (Norm = the norm above, F = the sublayer):
        post     Norm(x + Dropout(F(x)))     the paper (default)
        pre      x + Dropout(F(Norm(x)))     GPT-2, Llama
        seed000  x + Dropout(Norm(F(x)))     the code of seed 000 (its comment says post, its code does this)
        seed003  x + Norm(F(x))              the code of seed 003 (no dropout)
"""

from __future__ import annotations

from collections.abc import Callable

import torch
from torch import Tensor, nn

from scratchformer.config.model import NORMS as NORM_PLACEMENTS
from scratchformer.config.model import ModelConfig


class LayerNorm(nn.Module):
    """Normalise each vector to zero mean and unit variance, then scale and shift (Ba et al., 2016).

    `fused=False` runs the formula below; `fused=True` runs torch's kernel for the same formula
    (tests prove they agree to 1e-6).
    """

    def __init__(self, d_model: int, eps: float = 1e-5, fused: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma
        self.bias = nn.Parameter(torch.zeros(d_model))  # beta
        self.eps = eps
        self.fused = fused

    def forward(self, x: Tensor) -> Tensor:  # (..., D) -> (..., D)
        if self.fused:
            return nn.functional.layer_norm(x, x.shape[-1:], self.weight, self.bias, self.eps)
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        var = (x - mean).pow(2).mean(dim=-1, keepdim=True)  # (..., 1), biased variance as in nn.LayerNorm
        return (x - mean) / torch.sqrt(var + self.eps) * self.weight + self.bias


class RMSNorm(nn.Module):
    """Divide each vector by its root mean square, then scale (Zhang & Sennrich, 2019; Llama's norm).

    As Llama computes it: in float32 whatever the input dtype, cast back before the scale. `fused=True` runs
    torch's F.rms_norm on the same formula (tests prove they agree to 1e-6).
    """

    def __init__(self, d_model: int, eps: float = 1e-6, fused: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # gamma; no beta
        self.eps = eps
        self.fused = fused

    def forward(self, x: Tensor) -> Tensor:  # (..., D) -> (..., D)
        x32 = x.float()
        if self.fused:
            y = nn.functional.rms_norm(x32, x.shape[-1:], eps=self.eps)
        else:
            y = x32 * torch.rsqrt(x32.pow(2).mean(dim=-1, keepdim=True) + self.eps)  # (..., D)
        return self.weight * y.to(x.dtype)


class Seed000LayerNorm(nn.Module):
    """Seed 000's hand-written LayerNorm, as its code has it: `a * (x - mean) / (std + eps) + b`, where
    `x.std(-1)` is torch's default, the unbiased (Bessel-corrected, / (D-1)) standard deviation, and eps is added
    to the std, not under the square root. Against LayerNorm: the output is smaller by sqrt((D-1)/D) (0.999 at
    D=512) and eps acts differently near zero variance; both learn the same function up to weight. No torch kernel
    computes it, so `fused` changes nothing (it is kept for set_fused). Seed 000's eps is 1e-6
    (`layer_norm_eps=1e-6`)."""

    def __init__(self, d_model: int, eps: float = 1e-5, fused: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.ones(d_model))  # the seed's a
        self.bias = nn.Parameter(torch.zeros(d_model))  # the seed's b
        self.eps = eps
        self.fused = fused

    def forward(self, x: Tensor) -> Tensor:  # (..., D) -> (..., D)
        mean = x.mean(dim=-1, keepdim=True)  # (..., 1)
        std = x.std(dim=-1, keepdim=True)  # (..., 1), unbiased: sum of squares / (D - 1)
        return self.weight * (x - mean) / (std + self.eps) + self.bias


# norm_kind -> class (one table)
NORMS: dict[str, type[nn.Module]] = {"layer": LayerNorm, "rms": RMSNorm, "seed000": Seed000LayerNorm}


def make_norm(c: ModelConfig) -> nn.Module:
    """The norm `c.norm_kind` names, of width D with `c.layer_norm_eps`; the one place a model's norms are built."""
    return NORMS[c.norm_kind](c.d_model, eps=c.layer_norm_eps, fused=c.fused)


PLACEMENTS = NORM_PLACEMENTS  # config/model.py's NormPlacement names; formulas in the module docstring


class SublayerConnection(nn.Module):
    """The residual connection around one sublayer, with its norm where `placement` says (module docstring)."""

    def __init__(self, *, norm: nn.Module, dropout: float, placement: str = "post") -> None:
        super().__init__()
        if placement not in PLACEMENTS:
            raise ValueError(f"unknown norm placement {placement!r}; valid: {', '.join(PLACEMENTS)}")
        self.norm = norm
        self.dropout = nn.Dropout(dropout)
        self.placement = placement

    def forward(self, x: Tensor, sublayer: Callable[[Tensor], Tensor]) -> Tensor:  # (B, L, D) -> (B, L, D)
        if self.placement == "pre":
            return x + self._drop(sublayer(self.norm(x)))  # x + Dropout(F(Norm(x)))
        if self.placement == "seed000":
            return x + self._drop(self.norm(sublayer(x)))  # x + Dropout(Norm(F(x)))
        if self.placement == "seed003":
            return x + self.norm(sublayer(x))  # x + Norm(F(x))
        return self.norm(x + self._drop(sublayer(x)))  # post: Norm(x + Dropout(F(x)))

    def _drop(self, y: Tensor) -> Tensor:
        # Dropout only where it does something: skipping the no-op call saves ~3 us per sublayer per decoding step.
        return self.dropout(y) if self.training and self.dropout.p > 0 else y

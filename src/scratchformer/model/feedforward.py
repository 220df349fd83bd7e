"""Position-wise feed-forward network (Figure 1, "Feed Forward"; section 3.3), plain or gated, and the one table
of activations.

    mlp    FFN(x) = act(x W_1 + b_1) W_2 + b_2                 (B, L, D) -> (B, L, d_ff) -> (B, L, D)   (the paper)
    gated  FFN(x) = (act(x W_gate) * (x W_up)) W_2             SwiGLU (act = silu: Llama), GeGLU (act = gelu)
           (Shazeer 2020); W_gate and W_up are stacked in one matrix w_1 (D -> 2 d_ff), one matmul for both

The same linear maps apply to every position separately. ReLU is the paper's activation, GELU BERT's and GPT-2's,
SiLU (swish) Marian's and, gated, Llama's.
"""

from __future__ import annotations

from collections.abc import Callable
from dataclasses import dataclass

from torch import Tensor, nn


@dataclass(frozen=True)
class Activation:
    """One activation: how to build it, and its names in the libraries we read and write."""

    make: Callable[[], nn.Module]
    hf: tuple[str, ...]  # Hugging Face's `hidden_act` names for it; the first is the one written on export
    ct2: str  # CTranslate2's common_spec.Activation name


# config/model.py's Activation Literal has exactly these names (a test checks it); interop and engines read them here.
ACTIVATIONS: dict[str, Activation] = {
    "relu": Activation(nn.ReLU, ("relu",), "RELU"),
    "gelu": Activation(nn.GELU, ("gelu",), "GELU"),  # exact (erf)
    "gelu-tanh": Activation(lambda: nn.GELU(approximate="tanh"), ("gelu_new", "gelu_pytorch_tanh"), "GELUTanh"),
    "silu": Activation(nn.SiLU, ("swish", "silu"), "SWISH"),  # x * sigmoid(x), "swish" (Marian, Llama)
}


def make_activation(name: str) -> nn.Module:
    """A fresh module of the activation `name` (a key of ACTIVATIONS)."""
    return ACTIVATIONS[name].make()


class PositionwiseFeedForward(nn.Module):
    """The FFN box, `gated=False` (the paper's two matrices) or `gated=True` (GLU: three)."""

    def __init__(self, *, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True, gated: bool = False) -> None:
        super().__init__()
        self.d_ff, self.gated = d_ff, gated
        self.w_1 = nn.Linear(d_model, 2 * d_ff if gated else d_ff, bias=bias)  # expand: D -> d_ff ([gate; up])
        self.activation = make_activation(activation)
        self.dropout = nn.Dropout(dropout)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)  # contract: d_ff -> D

    def forward(self, x: Tensor) -> Tensor:
        if self.gated:
            gate, up = self.w_1(x).split(self.d_ff, dim=-1)  # (B, L, d_ff) each
            h = self.activation(gate) * up  # (B, L, d_ff)
        else:
            h = self.activation(self.w_1(x))  # (B, L, d_ff)
        if self.training and self.dropout.p > 0:  # no call at all when it would be the identity (decoding)
            h = self.dropout(h)
        return self.w_2(h)  # (B, L, D)

"""Position-wise feed-forward network (Figure 1, "Feed Forward"; section 3.3).

    FFN(x) = max(0, x W_1 + b_1) W_2 + b_2        (B, L, D) -> (B, L, d_ff) -> (B, L, D)

The same two linear maps apply to every position separately. GELU replaces ReLU for BERT / GPT-2,
SiLU (swish) for Marian.
"""

from __future__ import annotations

from torch import Tensor, nn

ACTIVATIONS = {
    "relu": nn.ReLU,
    "gelu": nn.GELU,
    "gelu-tanh": lambda: nn.GELU(approximate="tanh"),
    "silu": nn.SiLU,  # x * sigmoid(x), "swish" (Marian / OPUS-MT)
}


class PositionwiseFeedForward(nn.Module):
    def __init__(self, d_model: int, d_ff: int, activation: str = "relu", dropout: float = 0.0,
                 bias: bool = True) -> None:
        super().__init__()
        self.w_1 = nn.Linear(d_model, d_ff, bias=bias)  # expand: D -> d_ff
        self.activation = ACTIVATIONS[activation]()
        self.dropout = nn.Dropout(dropout)
        self.w_2 = nn.Linear(d_ff, d_model, bias=bias)  # contract: d_ff -> D

    def forward(self, x: Tensor) -> Tensor:
        h = self.activation(self.w_1(x))  # (B, L, d_ff)
        if self.training and self.dropout.p > 0:  # no call at all when it would be the identity (decoding)
            h = self.dropout(h)
        return self.w_2(h)  # (B, L, D)

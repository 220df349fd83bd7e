"""The encoder (Figure 1, left): N identical layers of self-attention and feed-forward, each in Add & Norm.

    EncoderLayer   x -> SublayerConnection(MultiHeadAttention(x, x, x)) -> SublayerConnection(FFN)
    Encoder        N layers (+ a final norm for pre-norm)            (B, L_src, D) -> (B, L_src, D)
"""

from __future__ import annotations

from torch import Tensor, nn

from scratchformer.model.attention import MultiHeadAttention
from scratchformer.model.norm import SublayerConnection


class EncoderLayer(nn.Module):
    def __init__(self, *, self_attn: MultiHeadAttention, feed_forward: nn.Module,
                 sublayers: list[SublayerConnection]) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.feed_forward = feed_forward
        self.sublayer = nn.ModuleList(sublayers)  # 2: around the attention, around the FFN

    def forward(self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        # x: (B, L, D); mask: (B, 1, 1, L) padding, or (B, 1, L, L); positions: (B|1, L) for rope, or None
        x = self.sublayer[0](x, lambda y: self.self_attn(y, mask=mask, positions=positions))  # (B, L, D)
        return self.sublayer[1](x, self.feed_forward)  # (B, L, D)


class Encoder(nn.Module):
    def __init__(self, *, layers: list[EncoderLayer], final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = final_norm

    def forward(self, x: Tensor, mask: Tensor | None = None, positions: Tensor | None = None) -> Tensor:
        for layer in self.layers:
            x = layer(x, mask, positions)  # (B, L_src, D)
        return self.norm(x) if self.norm is not None else x

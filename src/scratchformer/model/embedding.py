"""Input layer (Figure 1, bottom): token embedding x sqrt(d_model) + positional encoding, then dropout.

    TokenEmbedding                 (B, L) ids          -> (B, L, D)   lookup, scaled by sqrt(D) (section 3.4)
    SinusoidalPositionalEncoding   (B, L) positions    -> (B, L, D)   PE(pos, 2i) = sin(pos / 10000^(2i/D)),
                                                                      PE(pos, 2i+1) = cos(...)   (section 3.5)
    LearnedPositionalEmbedding     (B, L) positions    -> (B, L, D)   a trained table (Table 3, row E; BERT, GPT-2)
    InputLayer                     the sum of the above (+ token types and a norm for BERT) and dropout
"""

from __future__ import annotations

import math

import torch
from torch import Tensor, nn


class TokenEmbedding(nn.Module):
    """A lookup table of V vectors of width D, multiplied by sqrt(D) as in the paper."""

    def __init__(self, vocab_size: int, d_model: int, pad_id: int | None = None, scale: bool = True) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(vocab_size, d_model))
        self.pad_id = pad_id
        self.scale = math.sqrt(d_model) if scale else 1.0
        nn.init.normal_(self.weight, std=d_model**-0.5)  # after scaling: unit variance (fairseq's choice)
        if pad_id is not None:
            with torch.no_grad():
                self.weight[pad_id].zero_()

    def forward(self, ids: Tensor) -> Tensor:
        return nn.functional.embedding(ids, self.weight) * self.scale  # (B, L) -> (B, L, D)


def sinusoid_table(max_len: int, d_model: int, layout: str = "interleaved") -> Tensor:
    """(max_len, D) table of the paper's sinusoids.

    interleaved (paper, Annotated Transformer): dims 0,2,4,... are sin and 1,3,5,... are cos.
    concat (Marian, fairseq): the first D/2 dims are sin, the last D/2 are cos.
    """
    pos = torch.arange(max_len, dtype=torch.float64)[:, None]  # (max_len, 1)
    n_sin = (d_model + 1) // 2
    i = torch.arange(n_sin, dtype=torch.float64)[None, :]  # (1, D/2)
    angle = pos / torch.pow(10000.0, 2 * i / d_model)  # (max_len, D/2): pos / 10000^(2i/D)
    table = torch.zeros(max_len, d_model, dtype=torch.float64)
    if layout == "interleaved":
        table[:, 0::2] = torch.sin(angle)
        table[:, 1::2] = torch.cos(angle[:, : d_model // 2])
    elif layout == "concat":
        table[:, :n_sin] = torch.sin(angle)
        table[:, n_sin:] = torch.cos(angle[:, : d_model - n_sin])
    else:
        raise ValueError(f"unknown sinusoid layout {layout!r}")
    return table.float()


class SinusoidalPositionalEncoding(nn.Module):
    """Fixed sinusoids, looked up by position; no parameters."""

    def __init__(self, d_model: int, max_len: int, layout: str = "interleaved") -> None:
        super().__init__()
        self.register_buffer("table", sinusoid_table(max_len, d_model, layout), persistent=False)

    def forward(self, positions: Tensor) -> Tensor:
        return self.table[positions]  # (B, L) -> (B, L, D)


class LearnedPositionalEmbedding(nn.Module):
    """One trained vector per position."""

    def __init__(self, d_model: int, max_len: int) -> None:
        super().__init__()
        self.weight = nn.Parameter(torch.empty(max_len, d_model))
        nn.init.normal_(self.weight, std=0.02)

    def forward(self, positions: Tensor) -> Tensor:
        return nn.functional.embedding(positions, self.weight)  # (B, L) -> (B, L, D)


class InputLayer(nn.Module):
    """x = Dropout(TokenEmbedding(ids) + PositionalEncoding(positions) [+ TokenType]) [-> Norm]; no positions here
    for rope."""

    # One by one, keyword-only, as the seeds' embedding box takes them: a box of Figure 1 never reads a ModelConfig.
    def __init__(
        self,
        *,
        vocab_size: int,
        d_model: int,
        max_len: int,
        positions: str = "sinusoidal",
        dropout: float = 0.1,
        pad_id: int | None = 0,
        scale: bool = True,
        type_vocab_size: int = 0,
        norm: nn.Module | None = None,
    ) -> None:
        super().__init__()
        self.max_len = max_len
        self.token = TokenEmbedding(vocab_size, d_model, pad_id, scale)
        self.position: nn.Module | None = None  # "rope": positions enter inside attention (model/rope.py)
        if positions == "learned":
            self.position = LearnedPositionalEmbedding(d_model, max_len)
        elif positions != "rope":
            layout = "concat" if positions == "sinusoidal-concat" else "interleaved"
            self.position = SinusoidalPositionalEncoding(d_model, max_len, layout)
        self.token_type = nn.Embedding(type_vocab_size, d_model) if type_vocab_size > 0 else None
        self.norm = norm  # BERT's embedding norm (model/norm.py's make_norm), or None
        self.dropout = nn.Dropout(dropout)

    def forward(self, ids: Tensor, positions: Tensor | None = None, token_type_ids: Tensor | None = None,
                offset: int = 0) -> Tensor:
        # ids: (B, L); positions: (B, L) or None -> offset, offset+1, ... (offset > 0 when decoding with a cache)
        x = self.token(ids)  # (B, L, D)
        if self.position is not None:
            if positions is None:
                positions = torch.arange(offset, offset + ids.size(1), device=ids.device)[None, :]  # (1, L)
            x = x + self.position(positions)  # (B, L, D)
        if self.token_type is not None:
            types = token_type_ids if token_type_ids is not None else torch.zeros_like(ids)
            x = x + self.token_type(types)
        if self.norm is not None:
            x = self.norm(x)
        return self.dropout(x) if self.training and self.dropout.p > 0 else x  # (B, L, D)

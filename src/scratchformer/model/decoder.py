"""The decoder (Figure 1, right): N layers of masked self-attention, cross-attention and feed-forward.

    DecoderLayer   x -> Sub(MaskedSelfAttn(x)) -> Sub(CrossAttn(x, memory)) -> Sub(FFN)
    Decoder        N layers (+ a final norm for pre-norm)          (B, L_tgt, D) -> (B, L_tgt, D)
    DecoderCache   keys/values of every layer, kept between decoding steps

A GPT-style decoder-only model uses the same layer without the cross-attention sublayer.
"""

from __future__ import annotations

from torch import Tensor, nn

from scratchformer.model.attention import KVCache, MultiHeadAttention
from scratchformer.model.norm import SublayerConnection


class DecoderLayer(nn.Module):
    def __init__(self, *, self_attn: MultiHeadAttention, cross_attn: MultiHeadAttention | None,
                 feed_forward: nn.Module, sublayers: list[SublayerConnection]) -> None:
        super().__init__()
        self.self_attn = self_attn
        self.cross_attn = cross_attn
        self.feed_forward = feed_forward
        if len(sublayers) != (3 if cross_attn is not None else 2):
            raise ValueError(f"a decoder layer {'with' if cross_attn else 'without'} cross-attention has "
                             f"{3 if cross_attn else 2} sublayers, got {len(sublayers)}")
        self.sublayer = nn.ModuleList(sublayers)

    def forward(self, x: Tensor, memory: Tensor | None = None, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, self_cache: KVCache | None = None,
                cross_cache: KVCache | None = None, positions: Tensor | None = None) -> Tensor:
        # x: (B, L_tgt, D); memory: (B, L_src, D); self_mask: (B|1, 1, L_tgt, L_past + L_tgt);
        # memory_mask: (B, 1, 1, L_src); positions: (B|1, L_tgt) for rope (None: from the cache's length)
        x = self.sublayer[0](x, lambda y: self.self_attn(y, mask=self_mask, cache=self_cache, positions=positions))
        if self.cross_attn is not None:
            x = self.sublayer[1](x, lambda y: self.cross_attn(y, memory, memory_mask, cross_cache))
        return self.sublayer[-1](x, self.feed_forward)  # (B, L_tgt, D)


class DecoderCache:
    """One KVCache per attention per layer. `length` = how many target positions are cached."""

    def __init__(self, n_layers: int, cross: bool = True) -> None:
        self.self_attn = [KVCache() for _ in range(n_layers)]
        self.cross_attn = [KVCache(static=True) for _ in range(n_layers)] if cross else [None] * n_layers
        self._spare: tuple[Tensor, Tensor] | None = None  # the buffer pair reorder() gathers into next

    @property
    def length(self) -> int:
        return self.self_attn[0].length

    @property
    def nbytes(self) -> int:
        """Bytes of keys and values held, every layer and both attentions (GQA divides it by h / h_kv)."""
        return sum(c.nbytes for c in self.self_attn + self.cross_attn if c is not None)

    def reorder(self, index: Tensor, cross_index: Tensor | None = None) -> None:
        """Keep batch rows `index` in every self-attention cache and rows `cross_index` in every cross-attention
        cache (None: leave them alone, e.g. beams of one sentence reordered among themselves share its encoder
        keys/values). One spare buffer pair rotates through the layers and is kept for the next call, so a beam
        search step allocates nothing."""
        spare = self._spare
        for cache in self.self_attn:
            spare = cache.reorder(index, spare)
        self._spare = spare
        for cache in self.cross_attn if cross_index is not None else []:
            if cache is not None:
                cache.reorder(cross_index)


class Decoder(nn.Module):
    def __init__(self, *, layers: list[DecoderLayer], final_norm: nn.Module | None = None) -> None:
        super().__init__()
        self.layers = nn.ModuleList(layers)
        self.norm = final_norm

    def forward(self, x: Tensor, memory: Tensor | None = None, self_mask: Tensor | None = None,
                memory_mask: Tensor | None = None, cache: DecoderCache | None = None,
                positions: Tensor | None = None) -> Tensor:
        for i, layer in enumerate(self.layers):
            self_cache = cache.self_attn[i] if cache is not None else None
            cross_cache = cache.cross_attn[i] if cache is not None else None
            x = layer(x, memory, self_mask, memory_mask, self_cache, cross_cache, positions)  # (B, L_tgt, D)
        return self.norm(x) if self.norm is not None else x

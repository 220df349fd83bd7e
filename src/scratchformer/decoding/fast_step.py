"""The decoder's cached step written as one plain function: the same kernels on the same weights, less Python.

    lean = LeanDecoder.for_model(model)      # None when the model has a layer this step does not cover
    x = lean.embed(new (N, 1), offset)       # as model.tgt_embed(new, offset=offset)
    hidden = lean(x (N, 1, D), memory | None, src_mask (N / G, 1, 1, L_src), cache)   # as model.decoder(...)

A decoding step of the shipped en-zh model at batch 1 is ~40 small kernels; through the modules each also pays
an nn.Module call, a lambda per sublayer, mask checks and branches for paths decoding never takes (rope, GQA,
attention pictures, dropout): about as much time again as the arithmetic (profile_translate.py of e832339,
benchmarks/RESULTS.md). This file runs the step of `DecoderLayer` for one new token directly: the same
`F.linear` / `Linear.forward` (so packed weights, packing.py, still apply), the same
`F.scaled_dot_product_attention` calls with the same arguments, the same `F.layer_norm`, the same KV cache
objects (model/attention.py's KVCache: appended, reordered and shared by beams exactly as before). The logits
are therefore the modules' to the last bit, and tests/perf/test_fast_step.py holds it to that (tokens equal,
logits within 1e-5) for greedy and beam search.

Covered: the encoder-decoder with LayerNorm (post-, pre- or seed placements), the paper's FFN or a gated one with
any activation, learned or sinusoidal positions, h_kv = h and d_k = d_v, fused attention; anything else (rope, GQA,
RMSNorm, attention pictures kept, training mode, a forward hook on any part of the step) returns None and the
modules run, as before. The modules stay the readable reference: `with modules_step():` runs them (the equality
tests and benchmarks/bench_decode_paths.py compare the two).

Why captured.py's StaticStep (built on this one's coverage, `_sub` and weights) is a second step: a compiled graph needs
fixed shapes (a static cache read whole, attention written out), which run eagerly lose to this growing cache + SDPA.
"""

from __future__ import annotations

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar

from torch import Tensor, nn
from torch.nn import functional as F

from scratchformer.model.attention import _SDPA_ZEROES_EMPTY_ROWS, KVCache, MultiHeadAttention
from scratchformer.model.decoder import DecoderCache
from scratchformer.model.feedforward import PositionwiseFeedForward
from scratchformer.model.norm import LayerNorm
from scratchformer.model.transformer import EncoderDecoder

_MODULES: ContextVar[bool] = ContextVar("modules_step", default=False)


@contextmanager
def modules_step() -> Iterator[None]:
    """Inside the block (this thread, this task), decoding steps through the modules, not the lean step."""
    token = _MODULES.set(True)
    try:
        yield
    finally:
        _MODULES.reset(token)


def _norm(norm: LayerNorm) -> tuple[Tensor, Tensor, float]:
    return norm.weight, norm.bias, norm.eps


def modules_under(parts: list[nn.Module]) -> list[nn.Module]:
    """Every module under `parts`, each once (what `part.modules()` yields, in another order), by a plain walk of
    `_modules`: a fifth of the cost of `modules()`, whose generators and name strings took ~1 ms of each one-sentence
    call's three walks (dropout on?, hooks?, which Linears) on the shipped model."""
    seen: dict[int, nn.Module] = {}
    stack = list(parts)
    while stack:
        m = stack.pop()
        if id(m) not in seen:
            seen[id(m)] = m
            stack.extend(c for c in m._modules.values() if c is not None)
    return list(seen.values())


def _hooked(parts: list[nn.Module]) -> bool:
    """Whether any forward (pre-)hook would run inside `parts` (lab/heads.py masks heads by a hook on W^O; a global
    hook counts too): the lean step calls no module, so it would skip them."""
    from torch.nn.modules import module as nn_module  # the global hook registries live here

    if nn_module._global_forward_hooks or nn_module._global_forward_pre_hooks:
        return True
    return any(m._forward_hooks or m._forward_pre_hooks for m in modules_under(parts))


class LeanDecoder:
    """model.decoder's cached step (one new position per row) as a function; see the module docstring."""

    def __init__(self, model: EncoderDecoder) -> None:
        c = model.config
        self.model = model
        self.h, self.d = c.n_heads, c.head_dim_k
        self.placement = c.norm_placement
        self.layers = list(model.decoder.layers)
        self.final = model.decoder.norm
        # each layer's parts looked up once (an nn.Module attribute costs a __getattr__ call, ~100 a step): the
        # three sublayers' norms as (weight, bias, eps), then the Linear modules themselves (packing.py swaps
        # their forward while a call runs, so the module, not its bound forward, is kept)
        self.plan = [(tuple(_norm(s.norm) for s in layer.sublayer), layer.self_attn.w_qkv, layer.self_attn.w_o,
                      layer.cross_attn, layer.cross_attn.w_q, layer.cross_attn.w_o, layer.feed_forward.forward)
                     for layer in self.layers]
        emb = model.tgt_embed
        plain = emb.token_type is None and emb.norm is None and emb.position is not None
        position = getattr(emb.position, "table", getattr(emb.position, "weight", None))  # (max_len, D)
        self.embedding = (emb.token.weight, emb.token.scale, position) if plain and position is not None else None

    def embed(self, new: Tensor, offset: int) -> Tensor:
        """InputLayer.forward for new (N, 1) ids at position `offset`, as model.tgt_embed(new, offset=offset):
        the position's row is sliced rather than gathered through an arange (the same values are added)."""
        if self.embedding is None:
            return self.model.tgt_embed(new, offset=offset)
        weight, scale, position = self.embedding
        return F.embedding(new, weight) * scale + position[offset : offset + 1]  # (N, 1, D)

    @staticmethod
    def for_model(model: nn.Module) -> LeanDecoder | None:
        """A LeanDecoder for `model`, or None when it has a part this step does not cover (module docstring)."""
        if _MODULES.get() or not isinstance(model, EncoderDecoder) or model.training:
            return None
        if not _SDPA_ZEROES_EMPTY_ROWS:  # older torch: the modules zero all-masked rows themselves
            return None
        if _hooked([model.tgt_embed, model.decoder, model.generator]):  # a hook must see its module's call
            return None
        c = model.config
        if c.norm_kind != "layer" or c.positions == "rope" or c.kv_heads != c.n_heads or c.head_dim_k != c.head_dim_v:
            return None
        for layer in model.decoder.layers:
            attns = (layer.self_attn, layer.cross_attn)
            if not all(isinstance(a, MultiHeadAttention) and a.rope is None and a.attention.fused
                       and not a.attention.keep_weights and a.h_kv == a.h for a in attns):
                return None
            if not isinstance(layer.feed_forward, PositionwiseFeedForward):
                return None
            if not all(isinstance(s.norm, LayerNorm) and s.norm.fused for s in layer.sublayer):
                return None
        final = model.decoder.norm
        if final is not None and not (isinstance(final, LayerNorm) and final.fused):
            return None
        return LeanDecoder(model)

    def _sub(self, x: Tensor, norm: LayerNorm, f: Callable[..., Tensor], *args: object) -> Tensor:
        """SublayerConnection.forward without dropout (eval mode), F = f(., *args): the norm where `placement` says."""
        return self._sub_with(x, _norm(norm), f, *args)

    def _sub_with(self, x: Tensor, norm: tuple[Tensor, Tensor, float], f: Callable[..., Tensor], *args: object
                  ) -> Tensor:
        w, b, eps = norm
        p = self.placement
        if p == "pre":
            return x + f(F.layer_norm(x, x.shape[-1:], w, b, eps), *args)
        if p == "seed000" or p == "seed003":
            return x + F.layer_norm(f(x, *args), x.shape[-1:], w, b, eps)
        return F.layer_norm(x + f(x, *args), x.shape[-1:], w, b, eps)  # post (the paper)

    def _self_attn(self, y: Tensor, w_qkv: nn.Linear, w_o: nn.Linear, cache: KVCache) -> Tensor:
        n = y.size(0)
        q, k, v = w_qkv.forward(y).view(n, 1, 3, self.h, self.d).permute(2, 0, 3, 1, 4).unbind(0)  # (N, h, 1, d)
        k, v = cache.append(k, v)  # (N, h, t, d)
        out = F.scaled_dot_product_attention(q, k, v)  # (N, h, 1, d): the new row sees every cached key
        return w_o.forward(out.transpose(1, 2).reshape(n, 1, self.h * self.d))

    def _cross_attn(self, y: Tensor, a: MultiHeadAttention, w_q: nn.Linear, w_o: nn.Linear, cache: KVCache,
                    memory: Tensor | None, src_mask: Tensor | None) -> Tensor:
        n, h, d = y.size(0), self.h, self.d
        q = w_q.forward(y).view(n, 1, h, d).transpose(1, 2)  # (N, h, 1, d)
        if cache.k is None:  # first step: the encoder keys/values, once per sentence
            cache.set(*a._project_kv(memory))
        k, v = cache.get()  # (N / G, h, L_src, d)
        b_mem = k.size(0)
        r = n // b_mem  # R beams share one memory row: they attend as R queries of it (no copy per beam)
        if r > 1:
            q = q.view(b_mem, r, h, 1, d).transpose(1, 2).reshape(b_mem, h, r, d)
        out = F.scaled_dot_product_attention(q, k, v, attn_mask=src_mask)  # (N / G, h, R, d)
        if r > 1:
            out = out.view(b_mem, h, r, 1, d).transpose(1, 2).reshape(n, h, 1, d)
        return w_o.forward(out.transpose(1, 2).reshape(n, 1, h * d))

    def __call__(self, x: Tensor, memory: Tensor | None, src_mask: Tensor | None, cache: DecoderCache) -> Tensor:
        # x (N, 1, D): the new positions, embedded; memory (N / G, L_src, D) on the first step, else None
        sub = self._sub_with
        for (norms, w_qkv, self_o, cross, w_q, cross_o, ffn), own, enc in zip(self.plan, cache.self_attn,
                                                                             cache.cross_attn):
            x = sub(x, norms[0], self._self_attn, w_qkv, self_o, own)
            x = sub(x, norms[1], self._cross_attn, cross, w_q, cross_o, enc, memory, src_mask)
            x = sub(x, norms[2], ffn)  # eval mode: no dropout call inside
        if self.final is not None:
            w, b, eps = _norm(self.final)
            x = F.layer_norm(x, x.shape[-1:], w, b, eps)
        return x

"""Word alignments from cross-attention, as fairseq's `--print-alignment` (hard) and CTranslate2's `return_attention`.

    align(model, srcs, hyps) -> [[(0, 0), (2, 1), ...], ...]   (source index, target index) pairs per sentence
    pharaoh([(0, 0), (2, 1)]) -> "0-0 2-1"

Which attention: the last decoder layer's cross-attention, averaged over its heads, as fairseq's default
(`alignment_layer` = the last layer, `alignment_heads` = all). Each output is teacher-forced once more
(BOS + its tokens), so target token j's row is the attention of the step that predicted it, as during the
search. Each target token is aligned to the source token it attends to most; the source EOS and padding are
never chosen, and the target's EOS is not aligned (fairseq's `extract_hard_alignment`).

Indices are subword (token) positions, 0-based: source index i is the i-th id of `src_tok.encode(text)`,
target index j the j-th id of the hypothesis' `tokens` (the forced prefix included). Turn them into word
indices by grouping the pieces of each word.
"""

from __future__ import annotations

from collections.abc import Sequence

import torch

from scratchformer.decoding.common import eval_mode, model_device, pad_ids
from scratchformer.model.transformer import EncoderDecoder


def pharaoh(pairs: Sequence[tuple[int, int]]) -> str:
    """The Pharaoh format: "i-j" pairs (source-target), space-separated."""
    return " ".join(f"{i}-{j}" for i, j in pairs)


@torch.inference_mode()
def align(model: EncoderDecoder, srcs: Sequence[Sequence[int]], hyps: Sequence[Sequence[int]], bos: int,
          eos: int, pad: int) -> list[list[tuple[int, int]]]:
    """Hard alignments of each hypothesis (ids without BOS/EOS) to its source (ids ending in EOS)."""
    if not srcs:
        return []
    device = model_device(model)
    src = pad_ids(srcs, pad, device)  # (B, L_src)
    # the inputs that predicted each token: BOS and all but the last (a full-budget output then still fits)
    tgt = pad_ids([[bos, *h][: max(len(h), 1)] for h in hyps], pad, device)  # (B, T)
    attention = model.decoder.layers[-1].cross_attn.attention
    with eval_mode(model):
        model.keep_attention_weights(True)
        try:
            model(src, tgt)
            weights = attention.last_weights.float().mean(dim=1)  # (B, T, L_src), heads averaged
        finally:
            model.keep_attention_weights(False)
    real = (src != pad) & (src != eos)  # (B, L_src) source tokens that may be aligned
    best = weights.masked_fill(~real[:, None, :], -1.0).argmax(dim=-1).tolist()  # (B, T)
    has_source = real.any(dim=1).tolist()  # (B,) an EOS-only source aligns nothing
    return [[(best[b][j], j) for j in range(len(h))] if has_source[b] else [] for b, h in enumerate(hyps)]

"""Text in, text out: tokenize, batch by length, decode (greedy or beam), restore order, detokenize.

    translate_texts(model, src_tok, tgt_tok, ["Hello."], beam=4) -> ["你好。"]

Sources are encoded as in training (`data/batching.py:encode_pairs`): ``encode(s) + [EOS]``.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence

from scratchformer.data.tokenizers import EOS_ID, Tokenizer
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.model.transformer import EncoderDecoder


def translate_texts(
    model: EncoderDecoder,
    src_tok: Tokenizer,
    tgt_tok: Tokenizer,
    texts: Sequence[str],
    beam: int = 1,
    alpha: float = 0.6,
    batch_size: int = 32,
    max_tokens: int | None = None,
    max_len: int | None = None,
) -> list[str]:
    """Translate `texts`, in order. beam=1 is greedy. Batches hold at most `batch_size` sentences and, if
    given, at most `max_tokens` padded source tokens. max_len: most output tokens per sentence (None: the
    paper's src_len + 50). Empty lines give empty outputs; sources longer than the model's max_len are cut
    (with one warning)."""
    if beam < 1 or batch_size < 1:
        raise ValueError(f"beam={beam} and batch_size={batch_size} must be >= 1")
    for name, value in (("max_tokens", max_tokens), ("max_len", max_len)):
        if value is not None and value < 1:
            raise ValueError(f"{name}={value} must be >= 1 (or left unset)")
    limit = model.config.max_len
    ids = src_tok.encode_batch(texts)
    long = sum(len(s) + 1 > limit for s in ids)
    if long:
        warnings.warn(f"cut {long} source sentence(s) to the model's max_len={limit} tokens", stacklevel=2)
    srcs = [[*s[: limit - 1], EOS_ID] for s in ids]
    todo = sorted((i for i, t in enumerate(texts) if t.strip()), key=lambda i: -len(srcs[i]))  # longest first
    outputs = [""] * len(texts)
    for batch in _batches(todo, [len(s) for s in srcs], batch_size, max_tokens):
        src = [srcs[i] for i in batch]
        if beam == 1:
            hyps = greedy_decode(model, src, max_len=max_len)
        else:
            hyps = [h[0].tokens for h in beam_search(model, src, beam_size=beam, alpha=alpha, max_len=max_len)]
        for i, tokens in zip(batch, hyps):
            outputs[i] = tgt_tok.decode(tokens)
    return outputs


def _batches(order: list[int], lengths: list[int], batch_size: int, max_tokens: int | None) -> list[list[int]]:
    """Cut `order` (longest first) into batches of <= batch_size sentences and <= max_tokens padded tokens."""
    batches: list[list[int]] = []
    current: list[int] = []
    for i in order:
        longest = lengths[current[0]] if current else lengths[i]  # sorted: the first one is the longest
        too_many = max_tokens is not None and (len(current) + 1) * longest > max_tokens
        if current and (len(current) == batch_size or too_many):
            batches.append(current)
            current = []
        current.append(i)
    if current:
        batches.append(current)
    return batches

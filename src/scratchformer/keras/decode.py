"""Greedy and beam search for the Keras model (twins of decoding/greedy.py and decoding/beam.py), in numpy.

    greedy_decode(model, src) -> list[list[int]]      one token list per sentence, without BOS and EOS
    beam_search(model, src, beam_size=4, alpha=0.6)   the best hypothesis' tokens per sentence

The rules are ours, so the outputs are token for token ours: start from BOS; PAD is never emitted; at most
src_len + 50 tokens (the paper), capped at the model's max_len, EOS not counted; `max_len` replaces that budget.
Beam search ranks by the GNMT length penalty, score(Y) = log P(Y) / ((5 + |Y|) / 6) ** alpha, |Y| counting EOS,
with decoding/beam.py's steps (the top 2K of K*V candidates; an EOS among the first K closes a hypothesis; a
sentence is done when its best live beam cannot beat its K-th finished one). Each step re-runs the decoder on the
whole prefix (seed 001's loop; no KV cache): the same numbers, more work for long outputs.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

import numpy as np
from keras import ops

from scratchformer.config import ModelConfig
from scratchformer.errors import N_, InputError

PAPER_EXTRA_LEN = 50  # section 6.1: "maximum output length to input length + 50"
BOS_ID, EOS_ID, PAD_ID = 1, 2, 0  # data/tokenizers.py's specials


def special_ids(c: ModelConfig) -> tuple[int, int, int]:
    """(start, end, pad) ids: an imported model's own, else ours (decoding/common.py's special_ids)."""
    def first(*ids: int | None) -> int:
        return next(i for i in ids if i is not None)

    return (first(c.decoder_start_id, c.extra.get("decoder_start_token_id"), BOS_ID),
            first(c.extra.get("eos_token_id"), EOS_ID), first(c.pad_id, PAD_ID))


def pad_ids(seqs: Sequence[Sequence[int]], pad: int) -> np.ndarray:
    """(B, L) int32 array, right-padded with `pad`; one-line InputError for an empty sentence."""
    if any(len(s) == 0 for s in seqs):
        raise InputError(N_("every source needs at least one token (end sources with EOS)"))
    out = np.full((len(seqs), max((len(s) for s in seqs), default=0)), pad, dtype=np.int32)
    for b, s in enumerate(seqs):
        out[b, : len(s)] = s
    return out


def length_limits(src: np.ndarray, pad: int, max_len: int | None, cap: int) -> np.ndarray:
    """(B,) most tokens each sentence may emit, EOS not counted: src_len + 50 by default, never above `cap`."""
    limits = (src != pad).sum(axis=1) + PAPER_EXTRA_LEN if max_len is None else np.full(len(src), max_len)
    return np.minimum(limits, cap)


def log_softmax(logits: np.ndarray) -> np.ndarray:
    shifted = logits - logits.max(axis=-1, keepdims=True)
    return shifted - np.log(np.exp(shifted).sum(axis=-1, keepdims=True))


class Steps:
    """The model as a step function: tokens (N, t) with BOS first -> next-token logits (N, V) as numpy; `rows`
    (N,) names the sentence (row of the encoder output) each decoding row belongs to."""

    def __init__(self, model: Any, src: np.ndarray) -> None:
        self.model = model
        self.memory = model.encode(src)  # (B, L_src, D), once per batch
        self.src_mask = model.src_mask(src)  # (B, 1, 1, L_src)

    def __call__(self, tokens: np.ndarray, rows: np.ndarray) -> np.ndarray:
        memory, mask = ops.take(self.memory, rows, axis=0), ops.take(self.src_mask, rows, axis=0)
        hidden = self.model.decode(memory, mask, tokens)  # (N, t, D)
        return ops.convert_to_numpy(self.model.logits(hidden[:, -1:]))[:, 0].astype(np.float32)  # (N, V)


def greedy_decode(model: Any, src: Sequence[Sequence[int]], max_len: int | None = None) -> list[list[int]]:
    """Greedy translation of source id lists (each ending in EOS, as ours); batched, finished sentences drop out."""
    c = model.model_config
    bos, eos, pad = special_ids(c)
    if len(src) == 0:
        return []
    src_ids = pad_ids(src, pad)
    limits = length_limits(src_ids, pad, max_len, c.max_positions)  # (B,)
    steps = Steps(model, src_ids)
    rows = np.arange(len(src))  # (A,) original sentence of each active row
    tokens = np.full((len(src), 1), bos, dtype=np.int32)  # (A, 1 + t)
    out: list[list[int]] = [[] for _ in src]
    for t in range(int(limits.max())):
        logits = steps(tokens, rows)  # (A, V)
        logits[:, pad] = -np.inf
        tok = logits.argmax(axis=-1).astype(np.int32)  # (A,)
        ended = tok == eos
        for r, k, e in zip(rows, tok, ended):
            if not e:
                out[r].append(int(k))
        keep = ~(ended | (limits[rows] <= t + 1))
        rows, tokens = rows[keep], np.concatenate([tokens, tok[:, None]], axis=1)[keep]
        if len(rows) == 0:
            break
    return out


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al., 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha; alpha = 0 turns it off."""
    return ((5.0 + length) / 6.0) ** alpha


def _top(values: np.ndarray, n: int) -> np.ndarray:
    """(A, n) indices of the n largest per row, best first (ties: the lower index first)."""
    return np.argsort(-values, axis=1, kind="stable")[:, :n]


def beam_search(model: Any, src: Sequence[Sequence[int]], beam_size: int = 4, alpha: float = 0.6,
                max_len: int | None = None) -> list[list[int]]:
    """The best hypothesis' tokens (without BOS and EOS) per source id list; beam_size 1 is greedy."""
    c, k = model.model_config, beam_size
    bos, eos, pad = special_ids(c)
    if len(src) == 0:
        return []
    src_ids = pad_ids(src, pad)
    limits = length_limits(src_ids, pad, max_len, c.max_positions)  # (B,)
    steps = Steps(model, src_ids)
    a = len(src)
    sents = np.arange(a)  # (A,) original sentence of each active sentence
    tokens = np.full((a * k, 1), bos, dtype=np.int32)  # (A*K, t)
    scores = np.full((a, k), -np.inf, dtype=np.float32)
    scores[:, 0] = 0.0  # step 0: only beam 0 is live, so the K beams do not start as copies
    kth = np.full((a, k), -np.inf, dtype=np.float32)  # (A, K) best K finished scores
    finished: list[list[tuple[float, list[int]]]] = [[] for _ in src]
    for t in range(int(limits.max())):
        logprobs = log_softmax(steps(tokens, np.repeat(sents, k)))  # (A*K, V)
        logprobs[:, pad] = -np.inf
        vocab = logprobs.shape[-1]
        cand = (scores.reshape(-1, 1) + logprobs).reshape(a, k * vocab)  # (A, K*V)
        top_idx = _top(cand, 2 * k)  # (A, 2K)
        top_val = np.take_along_axis(cand, top_idx, 1)
        top_beam, top_tok = top_idx // vocab, top_idx % vocab
        is_eos = top_tok == eos
        lp = length_penalty(t + 1, alpha)  # |Y| = t + 1: t tokens + EOS, or t + 1 tokens for a live beam
        closed = is_eos[:, :k] & (top_val[:, :k] > -np.inf)  # (A, K)
        kth = -np.sort(-np.concatenate([kth, np.where(closed, top_val[:, :k] / lp, -np.inf)], 1), 1)[:, :k]
        pos = np.argsort(is_eos * (2 * k) + np.arange(2 * k), axis=1, kind="stable")[:, :k]  # first K non-EOS
        live_val, live_beam, live_tok = (np.take_along_axis(x, pos, 1) for x in (top_val, top_beam, top_tok))
        rows = np.arange(a)[:, None] * k + live_beam  # (A, K) row each live beam continues
        for i, j in zip(*np.nonzero(closed)):
            prefix = tokens[i * k + top_beam[i, j], 1:].tolist()
            finished[sents[i]].append((float(top_val[i, j] / lp), prefix))
        at_limit = limits[sents] <= t + 1  # (A,)
        done = (live_val[:, 0] / lp <= kth[:, -1]) | at_limit
        for i in np.nonzero(done & at_limit)[0]:  # budget reached: the live beams are hypotheses too
            for j in range(k):
                if live_val[i, j] > -np.inf:
                    prefix = [*tokens[rows[i, j], 1:].tolist(), int(live_tok[i, j])]
                    finished[sents[i]].append((float(live_val[i, j] / lp), prefix))
        keep = np.nonzero(~done)[0]
        if len(keep) == 0:
            break
        sents, kth, rows, live_tok, scores = sents[keep], kth[keep], rows[keep], live_tok[keep], live_val[keep]
        a = len(keep)
        tokens = np.concatenate([tokens[rows.reshape(-1)], live_tok.reshape(-1, 1).astype(np.int32)], axis=1)
    return [max(hyps, key=lambda h: h[0])[1] if hyps else [] for hyps in finished]

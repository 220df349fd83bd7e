"""Greedy decoding for the encoder-decoder: at each step keep the single most likely next token.

    greedy_decode(model, src) -> list[list[int]]   one token list per sentence, without BOS and EOS
    greedy_decode(model, src, Search(max_output_len=20, no_repeat_ngram=3))   what to search for: spec.py

Batched: a sentence that emits EOS (or reaches its length budget) drops out of the active batch, and its
rows leave the KV cache, so later steps only pay for sentences still running. The output equals decoding
each sentence alone (tests prove it). PAD is never emitted.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass, replace

import torch
from torch import Tensor

from scratchformer.decoding import cancel
from scratchformer.decoding.captured import CapturedDecoder, CapturedSteps
from scratchformer.decoding.common import (
    NEG_INF,
    Seq2SeqSteps,
    as_src_tensor,
    eval_mode,
    length_limits,
    model_device,
)
from scratchformer.decoding.constraints import Constraints, constrained_limits
from scratchformer.decoding.spec import GREEDY, Search
from scratchformer.model.transformer import EncoderDecoder


@dataclass
class GreedyOutput:
    """What `greedy_decode` returns when asked for more than the tokens."""

    tokens: list[list[int]]  # per sentence, without BOS/EOS
    scores: list[float] | None = None  # sum of log-probs of the emitted tokens, EOS included when emitted
    logits: Tensor | None = None  # (B, T, V) raw next-token logits at each step; zero after a sentence ended


@torch.inference_mode()
def greedy_decode(
    model: EncoderDecoder,
    src: Tensor | Sequence[Sequence[int]],
    search: Search = GREEDY,
    prefixes: Sequence[Sequence[int]] | None = None,
    captured: CapturedDecoder | None = None,
    return_scores: bool = False,
    return_logits: bool = False,
) -> list[list[int]] | GreedyOutput:
    """Greedy translation of src (B, L_src) ids (or id lists), right-padded with the pad id.

    search (spec.py): beam must be 1; it reads max_output_len (most tokens per sentence, EOS not counted; None ->
    src_len + 50, src_len = non-pad source ids; always capped at the model's positions), min_len (EOS suppressed
    until that many tokens were emitted), force_len (every sentence emits exactly N tokens: EOS suppressed, budget
    N; for benchmarks), use_cache (False re-runs the decoder on the whole prefix each step: the reference loop),
    bos / eos / pad (None -> the model's own: decoder_start_id, extra["eos_token_id"], pad_id; else ours 1, 2, 0),
    no_repeat_ngram / repetition_penalty (constraints.py; with either, scores are log-probs of the penalized
    distribution). alpha and n_best are beam search's.
    prefixes: forced target ids per sentence, kept in the output; the budget grows to hold them (constraints.py).
    captured: a compiled step for one row per sentence, and encoder (captured.py; the torch engine loads them), used
    with the cache.
    Returns the token lists, or a GreedyOutput when return_scores / return_logits is set.
    """
    if search.beam != 1:
        raise ValueError(f"greedy_decode keeps one hypothesis per sentence, got beam={search.beam}: use beam_search")
    cap = model.config.max_positions
    if search.force_len is not None:
        if not 0 < search.force_len <= cap:
            raise ValueError(f"force_len={search.force_len} must be in [1, the model's max_positions={cap}]")
        search = replace(search, max_output_len=search.force_len, min_len=search.force_len)
    search = search.resolved(model)  # the model's own ids where the spec leaves them None
    with eval_mode(model):
        src = as_src_tensor(src, search.pad, model_device(model))
        if src.size(0) == 0:
            return GreedyOutput([], [], None) if return_scores or return_logits else []
        constraints = Constraints(search.no_repeat_ngram, search.repetition_penalty, prefixes)
        limits = constrained_limits(length_limits(src, search.pad, search.max_output_len, cap), constraints,
                                    cap)  # (B,)
        src_mask = model.src_mask(src)  # (B, 1, 1, L_src)
        if captured is not None and search.use_cache:  # its encoder too, where compiled
            stepper = CapturedSteps(model, captured, src, src_mask, int(limits.max()))
        else:  # packed GEMMs (packing.py) where the row count holds to the end: one sentence, or a forced length
            memory = model.encode(src, src_mask)  # (B, L_src, D)
            pack = search.force_len is not None or src.size(0) == 1
            stepper = Seq2SeqSteps(model, memory, src_mask, search.use_cache, pack=pack)
        with stepper as steps:
            out = _greedy_loop(steps, limits, search, constraints if constraints.active else None,
                               (return_scores, return_logits))
    if return_scores or return_logits:
        return out
    return out.tokens


def _greedy_loop(steps: Seq2SeqSteps | CapturedSteps, limits: Tensor, search: Search, constraints: Constraints | None,
                 wants: tuple[bool, bool]) -> GreedyOutput:
    """The loop over `limits` (B,) budgets with `search`'s ids resolved; wants: (scores, logits) to return."""
    bos, eos, pad, min_len = search.bos, search.eos, search.pad, search.min_len
    want_scores, want_logits = wants
    device, b = limits.device, limits.size(0)
    t_max = int(limits.max()) if b else 0
    prefix = torch.full((b, t_max + 1), bos, dtype=torch.long, device=device)  # (A, 1 + T): BOS, then outputs
    out = torch.zeros((b, t_max), dtype=torch.long, device=device)  # (B, T) outputs by original row
    lengths = torch.zeros(b, dtype=torch.long, device=device)  # (B,) emitted tokens, EOS not counted
    scores = torch.zeros(b, dtype=torch.float32, device=device) if want_scores else None
    rows = torch.arange(b, device=device)  # (A,) original row of each active row
    limit = limits
    saved: list[tuple[Tensor, Tensor]] = []
    index: Tensor | None = None
    for t in range(t_max):
        cancel.check()  # a caller that gave up stops the work here (cancel.py)
        logits = steps(prefix[:, : t + 1], index)  # (A, V)
        index = None
        if want_logits:
            saved.append((rows, logits.float().clone()))
        if constraints is not None:  # log-probs of the penalized distribution, bans and prefix applied
            logits = logprobs = constraints.logprobs(logits, prefix[:, 1 : t + 1], rows, pad)  # (A, V)
        else:
            if scores is not None:  # the model's own distribution, before PAD/EOS suppression (as beam search)
                logprobs = torch.log_softmax(logits.float(), dim=-1)  # (A, V)
            if pad is not None:
                logits[:, pad] = NEG_INF
        if t < min_len:
            logits[:, eos] = NEG_INF
        tok = logits.argmax(dim=-1)  # (A,)
        if scores is not None:
            scores[rows] += logprobs.gather(1, tok[:, None]).squeeze(1)
        prefix[:, t + 1] = tok
        out[rows, t] = tok
        ended = tok == eos  # (A,)
        done = ended | (limit <= t + 1)
        if not bool(done.any()):  # one device sync per step
            continue
        lengths[rows[done]] = t + 1 - ended[done].long()
        keep = (~done).nonzero().squeeze(1)  # (A',)
        if keep.numel() == 0:
            break
        rows, limit, prefix, index = rows[keep], limit[keep], prefix[keep], keep
    lengths_list, out_list = lengths.tolist(), out.tolist()
    tokens = [row[:n] for row, n in zip(out_list, lengths_list)]
    logits_all = None
    if want_logits:
        vocab = saved[0][1].size(-1) if saved else 0
        logits_all = torch.zeros(b, len(saved), vocab, device=device)
        for t, (r, step_logits) in enumerate(saved):
            logits_all[r, t] = step_logits
    return GreedyOutput(tokens, scores.tolist() if scores is not None else None, logits_all)

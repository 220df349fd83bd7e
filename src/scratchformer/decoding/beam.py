"""Beam search (the paper, section 6.1: beam size 4, length penalty alpha = 0.6, max length src + 50).

    beam_search(model, src, Search(beam=4)) -> list[list[Hypothesis]]   n_best hypotheses per sentence, best first
    beam_search_core(step_fn, limits, Search(beam=4))          the algorithm alone, driven by any step function

What to search for (beam width, alpha, budget, n-best, repetition rules, ids) is one Search (spec.py).

Length penalty (GNMT, Wu et al. 2016): score(Y) = log P(Y) / lp(Y), lp(Y) = ((5 + |Y|) / 6) ** alpha, where
|Y| counts the emitted tokens *including* the final EOS. A hypothesis cut at the length budget has no EOS and
|Y| is its token count. alpha = 0 ranks by plain log-probability.

fairseq-style steps. The B sentences x K beams are flattened to B*K rows. At each step every live beam's
scores are added to the next-token log-probs and the top 2K of the K*V candidates are taken per sentence:
an EOS among the first K closes a hypothesis; the first K non-EOS candidates become the next beams (there
are always K: at most K of the 2K are EOS). At step 0 only beam 0 is live (the others score -inf), so the
K beams do not start as copies. A sentence is done when it has K finished hypotheses and its best live
beam can no longer beat the K-th of them, judged as Hugging Face's `early_stopping=False` does: by the
live beam's log-prob over lp of its current length (exact for alpha = 0, where log-probs only fall), or
when it reaches its length budget. Done sentences leave the batch, and their rows leave the KV cache.
With K = 1 this is exactly greedy decoding (tested).
"""

from __future__ import annotations

from collections.abc import Callable, Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from scratchformer.data.tokenizers import BOS_ID, EOS_ID
from scratchformer.decoding import cancel
from scratchformer.decoding.captured import CapturedDecoder, CapturedSteps
from scratchformer.decoding.common import (
    NEG_INF,
    as_src_tensor,
    eval_mode,
    length_limits,
    length_penalty,
    model_device,
)
from scratchformer.decoding.constraints import Constraints, constrained_limits
from scratchformer.decoding.ensemble import model_steps
from scratchformer.decoding.spec import PAPER, Search
from scratchformer.model.transformer import EncoderDecoder

# step_fn(tokens (N, t) with BOS first, index (N,) | None) -> log-probs (N, V) of the next token.
# Row i of `tokens` continues row index[i] of the previous call (None on the first call).
StepFn = Callable[[Tensor, Tensor | None], Tensor]


@dataclass
class Hypothesis:
    tokens: list[int]  # without BOS and EOS
    score: float  # logprob / lp(|Y|), what beams are ranked by
    logprob: float  # sum of the token log-probs, EOS included when emitted


@torch.inference_mode()
def beam_search(
    model: EncoderDecoder,
    src: Tensor | Sequence[Sequence[int]],
    search: Search = PAPER,
    prefixes: Sequence[Sequence[int]] | None = None,
    ensemble: Sequence[EncoderDecoder] = (),
    captured: CapturedDecoder | None = None,
) -> list[list[Hypothesis]]:
    """Beam search over src (B, L_src) ids (or id lists), right-padded with the pad id; n_best hypotheses each.

    search (spec.py; default: the paper's beam 4, alpha 0.6): beam (the width K), alpha, n_best, max_output_len (most
    tokens per sentence, EOS not counted; None -> src_len + 50; always capped at the model's positions), min_len (EOS
    suppressed until that many tokens were emitted), use_cache, bos / eos / pad (None -> the model's own:
    decoder_start_id, extra["eos_token_id"], pad_id; else ours 1, 2, 0), no_repeat_ngram / repetition_penalty
    (constraints.py; scores are then those of the penalized distribution, bans included). PAD is never emitted.
    prefixes: forced target ids per sentence, kept in the output; the budget grows to hold them (constraints.py).
    ensemble: more models with `model`'s vocabularies; each step's distribution is the mean of all their
    probabilities (fairseq's EnsembleModel; ensemble.py). `model` sets the ids and the length budget.
    captured: a compiled step for `search.beam` rows per sentence, and encoder (captured.py; the torch engine loads
    them), used with the cache and without an ensemble.
    """
    search = search.resolved(model)  # the model's own ids where the spec leaves them None
    pad, cap = search.pad, model.config.max_positions
    with eval_mode(model):
        src = as_src_tensor(src, pad, model_device(model))
        if src.size(0) == 0:
            return []
        constraints = Constraints(search.no_repeat_ngram, search.repetition_penalty, prefixes)
        limits = constrained_limits(length_limits(src, pad, search.max_output_len, cap), constraints, cap)  # (B,)
        # B*K decoding rows (sentence-major); the K beams of a sentence share its memory row
        # the row count holds until the end: one sentence (its beams run until it is done), or a fixed length
        fixed = src.size(0) == 1 or search.min_len >= int(limits.max())
        if captured is not None and search.use_cache and not ensemble:
            src_mask = model.src_mask(src)
            stepper = CapturedSteps(model, captured, src, src_mask, int(limits.max()), search.beam)
        else:
            stepper = model_steps([model, *ensemble], src, search.use_cache, search.beam, fixed)
        with stepper as steps:

            constrained = constraints.active

            def step_fn(tokens: Tensor, index: Tensor | None) -> Tensor:
                if constrained:
                    return constraints.logprobs(steps(tokens, index), tokens[:, 1:], steps.row_sentences(), pad)
                logprobs = torch.log_softmax(steps(tokens, index).float(), dim=-1)  # (N, V)
                if pad is not None:
                    logprobs[:, pad] = NEG_INF
                return logprobs

            return beam_search_core(step_fn, limits, search)


def beam_search_core(step_fn: StepFn, max_lens: Sequence[int] | Tensor, search: Search,
                     device: torch.device | str | None = None) -> list[list[Hypothesis]]:
    """The search itself; see the module docstring. max_lens: (B,) token budget per sentence, EOS not counted (a
    list goes to `device`). search: beam (K), alpha, n_best, min_len, bos / eos (None: ours, 1 and 2).

    Scores are kept in the dtype of the first log-probs step_fn returns (float64 fakes give exact tests).
    """
    beam, alpha, n_best, min_len = search.beam, search.alpha, search.n_best, search.min_len
    bos = BOS_ID if search.bos is None else search.bos
    eos = EOS_ID if search.eos is None else search.eos
    limits = torch.as_tensor(max_lens, dtype=torch.long, device=device)
    device = limits.device
    batch_size = a = limits.numel()  # active sentences
    t_max = int(limits.max()) if a else 0
    finished: list[list[Hypothesis]] = [[] for _ in range(batch_size)]
    sents = torch.arange(a, device=device)  # (A,) original sentence of each active sentence
    tokens = torch.full((a * beam, 1), bos, dtype=torch.long, device=device)  # (A*K, t): BOS, then outputs
    scores: Tensor | None = None  # (A, K) log-prob of each live beam
    kth_finished: Tensor | None = None  # (A, K) best K finished scores, -inf where fewer
    index: Tensor | None = None
    eos_index = torch.tensor([eos], device=device)
    ranks = torch.arange(2 * beam, device=device)  # (2K,) candidate positions
    starts = torch.arange(a, device=device)[:, None] * beam  # (A, 1) each active sentence's first row
    # whether any sentence may be done this step, kept in Python so that most steps skip the test's five ops: none
    # reaches its budget before the soonest one, and none can be beaten before it holds K finished hypotheses (a
    # sentence whose live beams all score -inf then runs on to its budget closing nothing: the same hypotheses)
    soonest, full = (int(limits.min()) if a else 0), False
    for t in range(t_max):
        cancel.check()  # a caller that gave up stops the work here (cancel.py)
        logprobs = step_fn(tokens, index)  # (A*K, V)
        vocab = logprobs.size(-1)
        if scores is None:
            scores = torch.full((a, beam), NEG_INF, dtype=logprobs.dtype, device=device)
            scores[:, 0] = 0.0  # step 0: only beam 0 is live
            kth_finished = torch.full((a, beam), NEG_INF, dtype=logprobs.dtype, device=device)
        if t < min_len:
            logprobs = logprobs.index_fill(1, eos_index, NEG_INF)  # a copy: step_fn's tensor may be shared
        cand = (scores.view(-1, 1) + logprobs).view(a, beam * vocab)  # (A, K*V)
        top_val, top_idx = cand.topk(2 * beam, dim=1)  # (A, 2K), best first
        top_beam, top_tok = top_idx // vocab, top_idx % vocab  # (A, 2K)
        lp = length_penalty(t + 1, alpha)  # |Y| = t + 1: t tokens + EOS, or t + 1 tokens for a live beam
        if bool((top_tok[:, :beam] == eos).any()):  # a device sync (the other: `done`); free on the CPU
            is_eos = top_tok == eos
            closed = is_eos[:, :beam] & (top_val[:, :beam] > NEG_INF)  # (A, K) an EOS among the first K closes one
            closed_scores = torch.where(closed, top_val[:, :beam] / lp, NEG_INF)
            kth_finished = torch.cat([kth_finished, closed_scores], dim=1).topk(beam, dim=1).values  # (A, K)
            full = bool((kth_finished[:, -1] > NEG_INF).any())
            # first K non-EOS candidates: sort key puts EOS after every non-EOS, order kept otherwise
            order = is_eos.long() * (2 * beam) + ranks  # (A, 2K)
            pos = order.topk(beam, dim=1, largest=False).indices  # (A, K), ascending = best first
            live_val, live_beam, live_tok = top_val.gather(1, pos), top_beam.gather(1, pos), top_tok.gather(1, pos)
        else:  # the common step: no EOS among any sentence's first K, so nothing closes and they are the live beams
            closed = None
            live_val, live_beam, live_tok = top_val[:, :beam], top_beam[:, :beam], top_tok[:, :beam]
        done = None
        if full or t + 1 >= soonest:
            at_limit = limits <= t + 1  # (A,)
            done = ((live_val[:, 0] / lp <= kth_finished[:, -1]) | at_limit).cpu()  # (A,)
        rows = starts[:a] + live_beam  # (A, K) row each live beam continues
        if closed is not None and bool(closed.any()):
            _collect(finished, sents, tokens, closed.cpu(), top_beam, top_val, lp, beam)
        if done is not None and bool(done.any()):
            ends = (done & at_limit.cpu()).nonzero().squeeze(1).to(device)
            if ends.numel():  # budget reached: the live beams are hypotheses too (no EOS, |Y| = t + 1)
                _collect_live(finished, sents[ends], tokens, rows[ends], live_tok[ends], live_val[ends], lp)
            keep = (~done).nonzero().squeeze(1).to(device)  # (A',)
            if keep.numel() == 0:
                break
            sents, limits, kth_finished = sents[keep], limits[keep], kth_finished[keep]
            rows, live_tok, live_val = rows[keep], live_tok[keep], live_val[keep]
            a = keep.numel()
            soonest, full = int(limits.min()), bool((kth_finished[:, -1] > NEG_INF).any())
        index = rows.flatten()  # (A*K,)
        tokens = torch.cat([tokens.index_select(0, index), live_tok.reshape(-1, 1)], dim=1)  # (A*K, t + 1)
        scores = live_val.contiguous()
    return [sorted(hyps, key=lambda h: -h.score)[:n_best] for hyps in finished]


def _collect(finished: list[list[Hypothesis]], sents: Tensor, tokens: Tensor, closed: Tensor, top_beam: Tensor,
             top_val: Tensor, lp: float, beam: int) -> None:
    """Store the hypotheses closed by EOS this step; closed (A, K) bool on the CPU."""
    where = closed.nonzero()  # (n, 2): (active sentence, candidate position)
    a_idx, j_idx = where[:, 0].to(tokens.device), where[:, 1].to(tokens.device)
    rows = a_idx * beam + top_beam[a_idx, j_idx]  # (n,)
    prefixes = tokens.index_select(0, rows)[:, 1:].tolist()  # without BOS
    logprobs = top_val[a_idx, j_idx].tolist()
    for s, toks, logprob in zip(sents[a_idx].tolist(), prefixes, logprobs):
        finished[s].append(Hypothesis(toks, logprob / lp, logprob))


def _collect_live(finished: list[list[Hypothesis]], sents: Tensor, tokens: Tensor, rows: Tensor, live_tok: Tensor,
                  live_val: Tensor, lp: float) -> None:
    """Store the live beams of sentences that reached their budget; rows, live_tok, live_val are (n, K)."""
    prefixes = torch.cat([tokens[rows.flatten(), 1:], live_tok.reshape(-1, 1)], dim=1).view(*rows.shape, -1)
    for s, beams, logprobs in zip(sents.tolist(), prefixes.tolist(), live_val.tolist()):
        for toks, logprob in zip(beams, logprobs):
            if logprob > NEG_INF:
                finished[s].append(Hypothesis(toks, logprob / lp, logprob))

"""What a search may emit besides the model's own choice: repetition rules and a forced target prefix.

    Constraints(no_repeat_ngram=3, repetition_penalty=1.2, prefixes=[[5, 9], []])
    constraints.logprobs(logits (N, V), hyps (N, t), sents (N,), pad) -> log-probs (N, V) a search picks from

Applied in this order, to each decoding row at each step (greedy and beam search alike):
  1. repetition penalty (CTRL, Keskar et al. 2019; Hugging Face's RepetitionPenaltyLogitsProcessor): the raw
     logit of every token already in the hypothesis (forced prefix included, BOS not) is divided by P when
     positive and multiplied by P when negative; P = 1 is off, P > 1 discourages repeats (P in [0.01, 100]).
     On the logits, before the softmax, in greedy and beam search alike (Hugging Face's beam search applies it
     to log-probs instead).
  2. log-softmax: scores are log-probs of this (penalized) distribution.
  3. bans (-inf): PAD, and with no_repeat_ngram = n fairseq's rule: a token that would complete an n-gram
     already in the hypothesis (e.g. n = 3 and "a b c ... a b": c is banned). Not renormalized.
  4. a forced prefix: while a sentence's hypothesis is shorter than its prefix, every token but the next prefix
     token gets -inf, and that token keeps its log-prob from step 2 (fairseq's prefix_tokens): bans of step 3
     never block a prefix token, and a hypothesis' score is the log-prob of the whole output, prefix included.
"""

from __future__ import annotations

from collections.abc import Sequence
from dataclasses import dataclass

import torch
from torch import Tensor

from scratchformer.config.decoding import MIN_PENALTY, check_repetition  # noqa: F401 (MIN_PENALTY: re-exported)
from scratchformer.decoding.common import NEG_INF
from scratchformer.errors import N_, ConfigError


def banned_ngram_tokens(hyps: Tensor, n: int, vocab: int) -> Tensor:
    """(N, V) True where a token would complete an n-gram already in hyps (N, L), BOS excluded."""
    rows, length = hyps.shape
    banned = torch.zeros(rows, vocab, dtype=torch.bool, device=hyps.device)
    if n < 1 or length < n:
        return banned
    grams = hyps.unfold(1, n, 1)  # (N, L - n + 1, n) every n-gram so far
    last = hyps[:, length - n + 1:]  # (N, n - 1) what the next token would complete
    match = (grams[:, :, : n - 1] == last[:, None, :]).all(dim=-1)  # (N, L - n + 1)
    hits = torch.zeros(rows, vocab, device=hyps.device).scatter_add_(1, grams[:, :, -1], match.float())
    return hits > 0


def penalize_repeats(logits: Tensor, hyps: Tensor, penalty: float) -> Tensor:
    """logits (N, V) with the tokens of hyps (N, L) divided by `penalty` where positive, multiplied where not."""
    if hyps.size(1) == 0 or penalty == 1.0:
        return logits
    seen = logits.gather(1, hyps)  # (N, L); a token seen twice is penalized once (the same value is written)
    return logits.scatter(1, hyps, torch.where(seen > 0, seen / penalty, seen * penalty))


def constrained_limits(limits: Tensor, constraints: Constraints, cap: int) -> Tensor:
    """(B,) token budgets grown to hold each sentence's forced prefix; one-line error for one beyond `cap`."""
    lengths = constraints.prefix_lengths(limits.size(0), limits.device)  # (B,)
    if lengths.numel() and int(lengths.max()) > cap:
        raise ConfigError(N_("prefix of {n} tokens: longer than the model's max_len={cap}"), n=int(lengths.max()),
                          cap=cap)
    return torch.maximum(limits, lengths)


@dataclass
class Constraints:
    """The options of one search; prefixes: forced target ids per sentence (original batch order), [] for none."""

    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    prefixes: Sequence[Sequence[int]] | None = None

    def __post_init__(self) -> None:
        check_repetition(self.no_repeat_ngram, self.repetition_penalty, ("no_repeat_ngram", "repetition_penalty"))
        self._forced: Tensor | None = None  # (B, P) prefix ids, -1 past each sentence's prefix
        self._any_prefix = any(len(p) for p in self.prefixes or [])

    @property
    def active(self) -> bool:
        """False when every option is off: the searches then take their plain path, unchanged."""
        return bool(self.no_repeat_ngram or self.repetition_penalty != 1.0 or self._any_prefix)

    def prefix_lengths(self, batch: int, device: torch.device) -> Tensor:
        """(B,) forced tokens per sentence; one-line error unless there is one prefix per sentence."""
        if self.prefixes is None:
            return torch.zeros(batch, dtype=torch.long, device=device)
        if len(self.prefixes) != batch:
            raise ConfigError(N_("prefixes: got {n} for {batch} sentence(s); give one per sentence ([] for none)"),
                              n=len(self.prefixes), batch=batch)
        return torch.tensor([len(p) for p in self.prefixes], dtype=torch.long, device=device)

    def forced_at(self, t: int, sents: Tensor) -> Tensor | None:
        """(N,) the prefix token each row must emit at step t (-1: free), None when no row is forced."""
        if not self._any_prefix:
            return None
        if self._forced is None or self._forced.device != sents.device:
            longest = max(len(p) for p in self.prefixes)
            forced = torch.full((len(self.prefixes), longest), -1, dtype=torch.long)
            for s, p in enumerate(self.prefixes):
                forced[s, : len(p)] = torch.as_tensor(list(p), dtype=torch.long)
            self._forced = forced.to(sents.device)
        if t >= self._forced.size(1):
            return None
        return self._forced[sents, t]  # (N,)

    def logprobs(self, logits: Tensor, hyps: Tensor, sents: Tensor, pad: int | None) -> Tensor:
        """Log-probs (N, V) to pick the next token from: logits (N, V), hyps (N, t) without BOS, sents (N,) the
        sentence (original batch row) of each row. The four steps of the module docstring."""
        logits = penalize_repeats(logits.float(), hyps, self.repetition_penalty)
        logprobs = torch.log_softmax(logits, dim=-1)  # (N, V)
        forced = self.forced_at(hyps.size(1), sents)
        kept = None if forced is None else logprobs.gather(1, forced.clamp(min=0)[:, None])  # (N, 1)
        if pad is not None:
            logprobs[:, pad] = NEG_INF
        if self.no_repeat_ngram:
            logprobs = logprobs.masked_fill(banned_ngram_tokens(hyps, self.no_repeat_ngram, logits.size(-1)),
                                            NEG_INF)
        if forced is not None:
            only = torch.full_like(logprobs, NEG_INF).scatter_(1, forced.clamp(min=0)[:, None], kept)  # (N, V)
            logprobs = torch.where((forced >= 0)[:, None], only, logprobs)
        return logprobs

"""What every decoder shares: the length rule, padding of id lists, and the model seen as a step function.

    Seq2SeqSteps   EncoderDecoder + KV cache as `step(tokens (N, t), index (N,) | None) -> logits (N, V)`
    length_limits  per-sentence output budget: config/budget.py's rule (src_len + 50, capped at the positions)

The step function is the one seam between the search algorithms and the model: greedy and beam search
only call it, so a fake with fixed probabilities can drive them in tests.

Contract of `index`: row i of `tokens` continues row `index[i]` of the previous call. Greedy passes it
when finished sentences drop out; beam search passes it every step (beams reorder, finished sentences
drop out). Rows only ever continue rows of the same sentence.
"""

from __future__ import annotations

import numbers
from collections.abc import Iterator, Sequence
from contextlib import ExitStack, contextmanager

import torch
from torch import Tensor, nn

from scratchformer.config.budget import output_budget
from scratchformer.data.tokenizers import BOS_ID, EOS_ID, PAD_ID
from scratchformer.decoding.fast_step import LeanDecoder, modules_under
from scratchformer.decoding.packing import packed_linears, serves_any_rows
from scratchformer.errors import N_, InputError
from scratchformer.model.transformer import EncoderDecoder

NEG_INF = float("-inf")  # the score of a token or hypothesis that must never be chosen


def model_device(model: nn.Module) -> torch.device:
    return next(model.parameters()).device


@contextmanager
def eval_mode(model: nn.Module) -> Iterator[None]:
    """Dropout off while decoding; the caller's train/eval mode is restored afterwards."""
    if not any(m.training for m in modules_under([model])):  # already in eval mode (every decode after the first): no
        yield  # recursive train() toggling, which costs ~0.1-0.3 ms a call
        return
    was_training = model.training
    model.eval()
    try:
        yield
    finally:
        model.train(was_training)


def pad_ids(seqs: Sequence[Sequence[int]], pad: int, device: torch.device, left: bool = False) -> Tensor:
    """(B, L) long tensor padded with `pad` on the right (or on the left)."""
    longest = max((len(s) for s in seqs), default=0)
    out = torch.full((len(seqs), longest), pad, dtype=torch.long)  # (B, L)
    for b, s in enumerate(seqs):
        if len(s):
            if left:
                out[b, longest - len(s):] = torch.as_tensor(s, dtype=torch.long)
            else:
                out[b, : len(s)] = torch.as_tensor(s, dtype=torch.long)
    return out.to(device)


def check_id_lists(seqs: object, name: str) -> None:
    """One-line InputError unless `seqs` is a list of non-empty token-id lists (or 1-D tensors): a flat list, a
    string or an empty sentence would otherwise fail deep inside padding or the model."""
    if isinstance(seqs, (str, bytes, Tensor)) or not isinstance(seqs, Sequence):
        raise InputError(N_("{name} must be a list of token-id lists, got {kind}"), name=name,
                         kind=type(seqs).__name__)
    for i, s in enumerate(seqs):
        if isinstance(s, Tensor) and s.dim() == 1:
            s = s.tolist()
        if isinstance(s, (str, bytes)) or not isinstance(s, Sequence):
            raise InputError(N_("{name}[{i}] must be a list of token ids, got {kind}: {name} is a list of token-id "
                                "lists (one per sentence)"), name=name, i=i, kind=type(s).__name__)
        if len(s) == 0:
            raise InputError(N_("{name}[{i}] is empty: every sequence needs at least one token (end sources with "
                                "EOS)"), name=name, i=i)
        if not all(isinstance(t, numbers.Integral) for t in s):
            bad = next(t for t in s if not isinstance(t, numbers.Integral))
            raise InputError(N_("{name}[{i}] holds {bad!r}, not a token id (an int)"), name=name, i=i, bad=bad)


def as_src_tensor(src: Tensor | Sequence[Sequence[int]], pad: int, device: torch.device) -> Tensor:
    """A (B, L_src) tensor right-padded with `pad`, on the model's device; one-line InputErrors for anything
    else (a 1-D tensor, zero-length sentences, a flat list)."""
    if isinstance(src, Tensor):
        if src.dim() != 2 or (src.size(0) > 0 and src.size(1) == 0):
            raise InputError(N_("src must be (B, L_src) token ids, got shape {shape}"), shape=tuple(src.shape))
        return src.to(device=device, dtype=torch.long)
    check_id_lists(src, "src")
    return pad_ids(src, pad, device)


def special_ids(model: EncoderDecoder, bos: int | None, eos: int | None, pad: int | None) -> tuple[int, int, int]:
    """The start, end and padding ids a search uses: the ones given, else the model's own (an imported Marian or
    BART model starts from its decoder_start_token_id and ends at its eos_token_id, as Hugging Face's generate
    does), else ours (BOS 1, EOS 2, PAD 0)."""
    c = model.config

    def first(*ids: int | None) -> int:  # imported configs may hold null ids
        return next(i for i in ids if i is not None)

    bos = first(bos, c.decoder_start_id, c.extra.get("decoder_start_token_id"), BOS_ID)
    return bos, first(eos, c.extra.get("eos_token_id"), EOS_ID), first(pad, c.pad_id, PAD_ID)


def length_limits(src: Tensor, pad: int, max_output_len: int | None, max_positions: int) -> Tensor:
    """(B,) most tokens each sentence of src (B, L_src) may emit, EOS not counted: config/budget.py's output_budget
    (src_len + 50 by default, never above the model's positions) of each sentence's non-pad length."""
    src_lens = (src != pad).sum(dim=1).tolist()  # (B,)
    return torch.tensor([output_budget(n, max_output_len, max_positions) for n in src_lens], dtype=torch.long,
                        device=src.device)


def length_penalty(length: int, alpha: float) -> float:
    """GNMT (Wu et al., 2016): lp(Y) = ((5 + |Y|) / 6) ** alpha; alpha = 0 turns it off."""
    return ((5.0 + length) / 6.0) ** alpha


class Seq2SeqSteps:
    """An EncoderDecoder as a step function: (tokens (N, t) with BOS first, index) -> next-token logits (N, V).

    memory (N / G, L_src, D) and src_mask (N / G, 1, 1, L_src) hold one row per sentence; the G = `beam`
    consecutive decoding rows of a sentence (beam search: its beams, G = K; greedy: G = 1) share it. With
    `use_cache`, each call feeds only the newest token and reads earlier keys/values from the DecoderCache, and
    the G rows read their sentence's encoder keys/values together (no copy per beam); without, it re-runs
    `model.decode` on the whole prefix (the seeds' loop, kept as the reference for tests and benchmarks).
    """

    def __init__(self, model: EncoderDecoder, memory: Tensor, src_mask: Tensor, use_cache: bool = True,
                 beam: int = 1, pack: bool = False) -> None:
        self.model, self.memory, self.src_mask, self.beam = model, memory, src_mask, beam
        self.cache = model.new_cache() if use_cache else None
        self.lean = LeanDecoder.for_model(model) if use_cache else None  # the same step with less Python (fast_step.py)
        self.rows = memory.size(0) * beam
        self.sents = torch.arange(memory.size(0), device=memory.device)  # (N / G,) original sentence of each
        # pack=True: GEMM weights packed for the starting row count (CPU, where autotune measures it faster;
        # packing.py). An fp32 pack pays only when that count holds for the whole call, so the searches ask for it
        # only then (one sentence in beam search, or every sentence forced to the same length); in batched free
        # decoding sentences finish early. A bf16 pack serves any row count: every call packs, and keeps it.
        self._any_rows = serves_any_rows(next(model.parameters()).dtype)
        self._pack_pending = pack or self._any_rows  # packed on the first cached step, closed when rows change
        self._packing = ExitStack()

    def __enter__(self) -> Seq2SeqSteps:
        return self

    def __exit__(self, *exc: object) -> None:
        self._packing.close()

    def row_sentences(self) -> Tensor:
        """(N,) the original sentence (batch row of `memory` as given) of each decoding row."""
        return self.sents.repeat_interleave(self.beam) if self.beam > 1 else self.sents

    def __call__(self, tokens: Tensor, index: Tensor | None = None) -> Tensor:
        if index is not None:
            self._select(index)
        if self.cache is None:
            memory, src_mask = self.memory, self.src_mask
            if self.beam > 1:  # the reference path copies each sentence's memory for its rows
                memory, src_mask = memory.repeat_interleave(self.beam, 0), src_mask.repeat_interleave(self.beam, 0)
            hidden = self.model.decode(memory, src_mask, tokens)  # (N, t, D)
            return self.model.generator.logits(hidden[:, -1]).float()  # (N, V); a bf16 model's in fp32
        return self._cached_step(tokens[:, -1:])

    def _cached_step(self, new: Tensor) -> Tensor:
        # The lean path of model.decode for one new token: its causal mask row is all True (it may see the whole
        # cache), so no self-attention mask is built; ids were validated by encode() and come from the model's own
        # vocabulary, so check_ids' device syncs are skipped. Cached == uncached tests guard this path.
        m, cache = self.model, self.cache
        if self._pack_pending:  # first step of a packed call: pack for the row count it starts with
            self._pack_pending = False
            self._packing.enter_context(packed_linears(m, [m.decoder, m.generator], self.rows))
        if self.lean is not None:  # the modules' numbers, less Python (fast_step.py)
            x = self.lean.embed(new, cache.length)  # (N, 1, D)
            hidden = self.lean(x, self.memory, self.src_mask, cache)  # (N, 1, D)
        else:
            x = m.tgt_embed(new, offset=cache.length)  # (N, 1, D)
            hidden = m.decoder(x, self.memory, None, self.src_mask, cache)  # (N, 1, D)
        self.memory = None  # from now on cross-attention reads its keys/values from the cache
        return m.generator.logits(hidden[:, -1]).float()  # (N, V): the search's sums in fp32 (a no-op for fp32)

    def _select(self, index: Tensor) -> None:
        shrink = index.numel() < self.rows
        self.rows = index.numel()
        if shrink and not self._any_rows:
            self._packing.close()  # fp32 packs only serve their own row count
        # Rows stay within their sentence, whose cross-attention keys/values serve all its rows: unless sentences
        # drop out, only the self-attention cache needs reordering.
        sentences = index[:: self.beam] // self.beam if shrink else None  # (N' / G,) sentences kept
        if self.cache is not None:
            self.cache.reorder(index, sentences)
        if sentences is not None:
            self.sents = self.sents.index_select(0, sentences)
            self.src_mask = self.src_mask.index_select(0, sentences)
            if self.memory is not None:
                self.memory = self.memory.index_select(0, sentences)

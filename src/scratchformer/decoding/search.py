"""Our own search as a backend of the pipeline (pipeline.py): greedy or beam search on the KV cache, with every
option (n-best, repetition rules, forced prefixes, alignments, an ensemble's step function). The options become one
Search (spec.py: Search.from_options), which greedy and beam search take.

    TorchSearch(model, members=()).decode_batch(srcs, options, prefixes, structured) -> [[Hyp], ...]
    TorchSearch(model, captured=steps_for)       steps_for(rows per sentence) -> a CapturedDecoder or None (captured.py)

The ensemble lives here only: more models are handed to beam search, which averages their probabilities at each
step (ensemble.py's step-function wrapper); beam 1 is then beam search of width 1, i.e. greedy.
"""

from __future__ import annotations

from collections.abc import Callable, Sequence

from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.alignment import align as word_alignments
from scratchformer.decoding.beam import beam_search
from scratchformer.decoding.captured import CapturedDecoder
from scratchformer.decoding.common import special_ids
from scratchformer.decoding.greedy import greedy_decode
from scratchformer.decoding.results import Hyp
from scratchformer.decoding.spec import Search
from scratchformer.model.transformer import EncoderDecoder


class TorchSearch:
    """`model` (and its ensemble `members`) decoding batches of EOS-terminated source id lists."""

    SUPPORTS = frozenset({"n_best", "no_repeat_ngram", "repetition_penalty", "align", "bf16", "prefix", "step"})

    def __init__(self, model: EncoderDecoder, members: Sequence[EncoderDecoder] = (),
                 captured: Callable[[int], CapturedDecoder | None] | None = None) -> None:
        self.model, self.members = model, list(members)
        self.models = 1 + len(self.members)
        self.captured = captured if not self.members else None  # an ensemble steps through the modules

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]:
        """Per source, its hypotheses (text empty: the pipeline detokenises): n_best scored ones from beam search
        when `structured` (beam 1 included: its scores carry the length penalty), else the best tokens alone."""
        search = Search.from_options(options, **({} if structured else {"n_best": 1}))
        greedy = not structured and search.beam == 1 and not self.members
        captured = self.captured(search.beam) if self.captured is not None else None
        if greedy:
            return [[Hyp("", 0.0, tokens)] for tokens in greedy_decode(self.model, srcs, search, prefixes, captured)]
        found = beam_search(self.model, srcs, search, prefixes, self.members, captured)
        if not structured:
            return [[Hyp("", 0.0, hs[0].tokens)] for hs in found]
        alignments: list = [None] * sum(map(len, found))
        if options.align:
            bos, eos, pad = special_ids(self.model, None, None, None)
            alignments = word_alignments(self.model, [s for s, hs in zip(srcs, found) for _ in hs],
                                         [h.tokens for hs in found for h in hs], bos, eos, pad)
        flat = iter(alignments)
        return [[Hyp("", h.score, h.tokens, next(flat)) for h in hs] for hs in found]

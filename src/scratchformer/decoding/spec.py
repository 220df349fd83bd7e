"""What a search is asked to do, in one frozen object each: the searches take it, the model and the batch.

    greedy_decode(model, src, Search(max_output_len=40))             greedy.py
    beam_search(model, src, Search(beam=4, alpha=0.6, n_best=2))    beam.py
    beam_search_core(step_fn, limits, Search(beam=4))               beam.py, driven by any step function

sampling.py's `Sampling` is the same for decoder-only models: sample(model, prompts, Sampling(max_new_tokens=20)).

`Search.from_options(options)` is the spec of a run's DecodingOptions (config/decoding.py, which checks them once
when they are loaded or given); the fields below keep their names from the flag to the kernel (`beam` is the beam
width everywhere). A Search built by hand is checked for what the search itself cannot run (a beam < 1, n_best
outside [1, beam]; Constraints checks the repetition rules): a ValueError, a caller's bug rather than user input.
"""

from __future__ import annotations

from dataclasses import dataclass, replace
from typing import Any


@dataclass(frozen=True)
class Search:
    """A greedy or beam search over an encoder-decoder:

    beam                hypotheses kept per sentence (the beam width); 1 = greedy (greedy_decode needs 1)
    alpha               the GNMT length penalty's exponent; beam search ranks by logprob / ((5 + |Y|) / 6) ** alpha
    max_output_len      most tokens per sentence, EOS not counted; None: source length + 50 (config/budget.py's
                        output_budget), always capped at the model's positions
    n_best              hypotheses returned per sentence, best first (beam search; <= beam)
    min_len             EOS is suppressed until this many tokens were emitted
    force_len           greedy only: every sentence emits exactly this many tokens (benchmarks)
    no_repeat_ngram     never complete an n-gram of this size already in the hypothesis (0 = off; constraints.py)
    repetition_penalty  divide the logits of tokens already emitted by this (1 = off; constraints.py)
    use_cache           False re-runs the decoder on the whole prefix each step (the seeds' reference loop)
    bos, eos, pad       the start / end / padding ids; None: the model's own, else ours (1, 2, 0)
    """

    beam: int = 1
    alpha: float = 0.6
    max_output_len: int | None = None
    n_best: int = 1
    min_len: int = 0
    force_len: int | None = None
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    use_cache: bool = True
    bos: int | None = None
    eos: int | None = None
    pad: int | None = None

    def __post_init__(self) -> None:
        if self.beam < 1 or not 1 <= self.n_best <= self.beam:
            raise ValueError(f"need beam >= 1 and 1 <= n_best <= beam, got beam={self.beam}, n_best={self.n_best}")

    def resolved(self, model: Any) -> Search:
        """This spec with its bos / eos / pad set: the ones given, else the model's own, else ours (common.py's
        special_ids)."""
        from scratchformer.decoding.common import special_ids  # late: common imports the steps, torch and the model

        return replace(self, **dict(zip(("bos", "eos", "pad"), special_ids(model, self.bos, self.eos, self.pad))))

    @classmethod
    def from_options(cls, options: Any, **fields: Any) -> Search:
        """The search a DecodingOptions asks for (its beam, alpha, output budget, n-best and repetition rules), with
        `fields` in place of any of them (e.g. n_best=1 where only the best output is wanted)."""
        spec = dict(beam=options.beam, alpha=options.alpha, max_output_len=options.max_output_len,
                    n_best=options.n_best, no_repeat_ngram=options.no_repeat_ngram,
                    repetition_penalty=options.repetition_penalty)
        return cls(**{**spec, **fields})


GREEDY = Search()  # greedy_decode's default: beam 1, the paper's budget
PAPER = Search(beam=4, alpha=0.6)  # beam_search's default: section 6.1, beam size 4, length penalty alpha = 0.6

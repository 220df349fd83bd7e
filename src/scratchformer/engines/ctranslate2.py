"""The ctranslate2 engine: our search's semantics on `ctranslate2.Translator` (CPU), over the CTranslate2 export
(export/ctranslate2.py) that it keeps in the run directory (written on first use, rebuilt when its stamp changes).

Sources are `encode(s)[:max_len - 1] + [</s>]`, with config/budget.py's output budget per sentence (source length
+ 50, capped at the model's positions), EOS allowed at step 0 (CT2's default min_decoding_length is 1). CT2 takes one
max_decoding_length per call, so a batch runs to its longest budget: greedy outputs are cut to their own (exact, a
longer budget only appends), and a beam search that reached a shorter one of its batch is run again with it.

Beam search: CT2 ranks by logprob / len^p (len without </s>) and stops a sentence once K * patience hypotheses
have finished; decoding/beam.py ranks by GNMT's logprob / ((5 + |Y|) / 6)^alpha (|Y| counting </s>) and stops when
its best live beam, normalised at its current length, cannot beat its K-th finished one. So CT2 returns all its
finished hypotheses (</s> kept, its normalisation undone) and GNMT picks among them; patience lets it see the
ones ours finds after the K-th. What can still differ: a best hypothesis ours finds after CT2's K * patience-th,
or one CT2 finds after ours stopped (its rule is a heuristic for alpha > 0); float32 near-ties.
"""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from scratchformer.config.budget import output_budget
from scratchformer.config.decoding import DecodingOptions
from scratchformer.decoding.common import length_penalty, special_ids
from scratchformer.decoding.results import Hyp
from scratchformer.export.ctranslate2 import Scored, _token_table, cached_export, check_expressible
from scratchformer.runs import Run

# CTranslate2's own length normalisation, logprob / len^(BETA * alpha), is used only to rank what it keeps when
# more than K * patience hypotheses finish at its last step; 0.75 alpha makes len^beta follow GNMT's
# ((5 + len) / 6)^alpha in slope around 15 tokens, so what it drops is what GNMT ranks last.
BETA = 0.75


class Backend:
    """Our search's semantics on ctranslate2.Translator (CPU), exported into the run directory on first use.

    options.dtype int8: CT2's own int8 compute type (quantised when loaded; compute_type="int8" says
    the same); threads: CT2's intra_threads (0 = its default); patience: CT2 keeps searching until K * patience
    hypotheses have finished, and GNMT picks among them (models/en-zh, 1,000 test sentences, beam 4: outputs
    identical to ours for 965 at patience 1, 998 at 2, 1,000 at 3; bench_engines.py of e832339). At the shipped
    alpha 1.5, 100 test sentences: 97 at patience 2, 98 at 3 and 4 (two sentences differ at any patience: one search
    finds its best hypothesis after the other has stopped), so the default is 3: parity first; its --patience set it."""

    SUPPORTS = frozenset({"int8"})
    models = 1

    def __init__(self, run: Run, options: DecodingOptions | None = None, compute_type: str = "float32",
                 threads: int = 0, patience: float = 3.0) -> None:
        import ctranslate2

        check_expressible(run)
        compute_type = "int8" if options is not None and options.dtype == "int8" else compute_type
        self.run, self.patience = run, patience
        self.path = cached_export(run)
        self.engine = ctranslate2.Translator(str(self.path), device="cpu", compute_type=compute_type,
                                             intra_threads=threads, inter_threads=1)
        self.src_tokens = _token_table(run.src_tok, "source")
        tgt_tokens = _token_table(run.tgt_tok, "target")
        self.tgt_ids = {t: i for i, t in enumerate(tgt_tokens)}
        self.eos = tgt_tokens[special_ids(run.model, None, None, None)[1]]

    def decode_batch(self, srcs: list[list[int]], options: DecodingOptions, prefixes: list[list[int]] | None,
                     structured: bool) -> list[list[Hyp]]:
        """The pipeline's batch (EOS-terminated ids; CT2 adds its own </s>): the best hypothesis of each."""
        found = self.translate_ids([s[:-1] for s in srcs], options.beam, options.alpha, options.max_output_len,
                                   len(srcs))
        return [[Hyp("", 0.0, tokens)] for tokens in found]

    def translate_ids(self, srcs: Sequence[Sequence[int]], beam: int = 4, alpha: float = 0.6,
                      max_output_len: int | None = None, batch_size: int = 32) -> list[list[int]]:
        """Target ids (no BOS/EOS) of source ids as `src_tok.encode` gives them (</s> is added here), in order:
        what greedy_decode / beam_search return for `encode(s)[:positions - 1] + [EOS]`."""
        cap = self.run.model.config.max_positions
        srcs = [list(s)[: cap - 1] for s in srcs]  # CT2 appends </s> (add_source_eos)
        limits = [output_budget(len(s) + 1, max_output_len, cap) for s in srcs]  # the source with its </s>
        order = sorted(range(len(srcs)), key=lambda i: -len(srcs[i]))  # longest first, batches as the pipeline
        outputs: list[list[int]] = [[] for _ in srcs]
        for start in range(0, len(order), batch_size):
            batch = order[start: start + batch_size]
            tokens = [[self.src_tokens[t] for t in srcs[i]] for i in batch]
            for i, out in zip(batch, self._search(tokens, [limits[i] for i in batch], beam, alpha)):
                outputs[i] = out
        return outputs

    def _search(self, tokens: list[list[str]], limits: list[int], beam: int, alpha: float) -> list[list[int]]:
        """Token ids per sentence (no BOS/EOS), each within its own budget (CT2 takes one per call)."""
        longest = max(limits)
        if beam == 1:  # greedy: a longer budget only appends tokens, so one call at the longest, then cut, is exact
            results = self._run(tokens, longest, beam_size=1)
            return [self._ids(r.hypotheses[0])[:n] for r, n in zip(results, limits)]
        found = self._beam(tokens, longest, beam, alpha)
        for j, n in enumerate(limits):  # a search that ran to step n - 1 of a shorter budget: again with its own
            if n < longest and max(len(h) for h, _ in found[j]) >= n:
                found[j] = self._beam([tokens[j]], n, beam, alpha)[0]
        return [self._best(hyps, alpha) for hyps in found]

    def _run(self, tokens: list[list[str]], limit: int, **options: Any) -> list:
        return self.engine.translate_batch(tokens, max_decoding_length=limit, min_decoding_length=0,
                                           max_input_length=0, end_token=self.eos, max_batch_size=0, **options)

    def _beam(self, tokens: list[list[str]], limit: int, beam: int, alpha: float) -> list[list[Scored]]:
        """Each sentence's finished hypotheses as (tokens, </s> kept where it ended; summed log-prob). CT2's
        normalisation score / len^beta (len counting </s>) is undone; beta > 0 also keeps CT2 searching until
        K * patience hypotheses are finished (at 0 it stops once its best is certain, which is ours too)."""
        beta = BETA * alpha
        results = self._run(tokens, limit, beam_size=beam, patience=self.patience, length_penalty=beta,
                            num_hypotheses=round(beam * self.patience), return_end_token=True, return_scores=True)
        return [[(h, score * len(h) ** beta) for h, score in zip(r.hypotheses, r.scores)] for r in results]

    def _best(self, hyps: list[Scored], alpha: float) -> list[int]:
        """beam.py's ranking: logprob / ((5 + |Y|) / 6)^alpha, |Y| counting </s> where the hypothesis ended."""
        tokens, _ = max(hyps, key=lambda h: h[1] / length_penalty(len(h[0]), alpha))
        return self._ids(tokens[:-1] if tokens and tokens[-1] == self.eos else tokens)

    def _ids(self, hypothesis: list[str]) -> list[int]:
        return [self.tgt_ids[t] for t in hypothesis]

"""One way into translation: `Translator(run, options).translate(texts)`, for translate, evaluate, serve, report,
plot attention, the exports' checks and the benchmarks, on every engine; `Translator.from_model` for a model held
in memory (training's end-of-run samples, the lab's masked heads, tests), on our own engine.

    from scratchformer.engines import Translator
    from scratchformer.runs import load_run

    run = load_run("models/en-zh")
    Translator(run).translate(["Open the file."])                      # the run's own decoding.json
    Translator(run, run.decoding.pick(beam=1, engine="onnxruntime"))    # one option changed, another engine
    Translator(run).translate(texts, progress=True)                    # a tqdm bar with an ETA on stderr
    Translator.from_model(model, src_tok, tgt_tok).translate(texts, beam=1)  # no run folder: DecodingOptions()

The options (config/decoding.py: DecodingOptions) checked themselves when they were made; here they are checked
once more, against the model and the backend (`DecodingOptions.check_for`, called nowhere else): the architecture,
beam vs the vocabulary, max_output_len vs the positions, the memory of the worst batch, and what the backend
declares it supports (`SUPPORTS`): an option it does not honour is one line naming it. The steps themselves are
decoding/pipeline.py's: sentences (pre-processor), ids, one token-budget batcher, the backend's search,
detokenise, post-processing.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from pathlib import Path
from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import Tokenizer
from scratchformer.decoding.pipeline import Backend, check_texts, run_pipeline
from scratchformer.decoding.results import Translation
from scratchformer.engines.backends import engine_module, make_backend
from scratchformer.errors import N_, ConfigError, ScratchformerWarning
from scratchformer.runs import Run

IN_MEMORY = Path("<a model in memory>")  # the path of from_model's run: it has no folder


class Translator:
    """A run, its decoding options (default: the run's decoding.json) and the search of `options.engine`.

    Messages name the options as the options say (their `named_as`: `--beam 0` from flags, `beam=0` from the API);
    settings: the engine's own (threads; CTranslate2's patience; onnxruntime's export folder); backend: a search to
    share (evolve)."""

    def __init__(self, run: Run, options: DecodingOptions | None = None, *, backend: Backend | None = None,
                 **settings: Any) -> None:
        self.run, self.options = run, options or run.decoding
        kind = (type(backend) if backend is not None else engine_module(self.options.engine).Backend
                if getattr(run.model_config, "arch", None) == "encoder-decoder" else None)  # else check_for says
        members = getattr(backend, "models", None) or getattr(kind, "models", 1 + len(run.members))
        # the one check against the model and the backend, before the backend exports or compiles anything
        self.options.check_for(run.model_config, getattr(kind, "SUPPORTS", ()), members=members)
        self.backend = backend or make_backend(run, self.options, **settings)

    @classmethod
    def from_model(cls, model: Any, src_tok: Tokenizer, tgt_tok: Tokenizer, options: DecodingOptions | None = None,
                   *, ensemble: Sequence[Any] = ()) -> Translator:
        """The Translator of a model in memory with its tokenizers (no run folder, so no decoding.json: `options`,
        default DecodingOptions()). Our own engine only (the others decode an export of a run folder), on the eager
        step: a compiled step is cached by run, and would not see a hook on the model (the lab masks heads so).
        ensemble: more models with the same vocabularies, averaged with `model` at every step."""
        options = options or DecodingOptions()
        if options.engine != "torch":
            raise ConfigError(N_("engine={engine}: a model in memory decodes on our own engine (torch); save it as a "
                                 "run to decode it on another"), engine=options.engine)
        if options.step == "captured":
            warnings.warn(ScratchformerWarning(N_("a model in memory runs the eager step; step='captured' is chosen "
                                                  "by Translator(run, options)")), stacklevel=2)
        options = options.pick(step="eager")
        run = Run(IN_MEMORY, model, getattr(model, "config", None), src_tok, tgt_tok, None, options, list(ensemble))
        return cls(run, options)

    @property
    def engine(self) -> str:
        return self.options.engine

    def evolve(self, **changes: Any) -> Translator:
        """The same run and search with some options changed (checked again): serve's per-request beam and n-best.
        The engine and dtype stay (they are the search itself)."""
        options = self.options.pick(**changes)
        if (options.engine, options.dtype) != (self.options.engine, self.options.dtype):
            raise ConfigError(N_("engine and dtype are the search itself: make another Translator to change them"))
        return Translator(self.run, options, backend=self.backend)

    def translate(self, texts: Sequence[str], prefix: str | Sequence[str | None] | None = None,
                  return_hyps: bool = False, progress: bool = False, **changes: Any) -> list[str] | list[Translation]:
        """`texts` translated, in order: strings, or one Translation per text (results.py) with n_best > 1, align or
        `return_hyps`. prefix: target text forced at the start of every output, or one per text. progress: a tqdm
        bar with an ETA on stderr. changes: options for this call only (beam=1, ...; as CTranslate2's
        translate_batch takes them), checked as evolve does."""
        if changes:
            return self.evolve(**changes).translate(texts, prefix, return_hyps, progress)
        texts = check_texts(texts)
        if prefix is not None and any(prefix if not isinstance(prefix, str) else [prefix]):
            self.options.check_supported(self.backend.SUPPORTS, prefix=True)
        o = self.options
        structured = o.n_best > 1 or o.align or return_hyps
        return run_pipeline(self.backend, (self.run.src_tok, self.run.tgt_tok), self.run.model_config.max_positions,
                            texts, o, prefix, structured, progress)


"""The serve room's decoding side: one loaded run and its engines.Translator (the CLI's own door), so the service
prints what `scratchformer translate` prints for the same options. The server-wide options are the run's
decoding.json with serve's flags over it (every option the file holds is honoured); a request may choose its beam
and n-best (Options): a `pick` of the server's options (so the options' one check runs, in the request's words)
and a Translator made with it (the one check against the model and the backend)."""

from __future__ import annotations

from collections.abc import Mapping
from dataclasses import dataclass, field
from typing import Any

from scratchformer.config.decoding_flags import from_args
from scratchformer.data.corpus import corpus_languages
from scratchformer.engines import Translator
from scratchformer.errors import N_, ConfigError
from scratchformer.runs import Run

# Codes clients use for the same language (LibreTranslate >= 1.6 calls Simplified Chinese "zh-Hans").
ALIASES = {"zh-hans": "zh", "zh-cn": "zh", "zh_cn": "zh", "en-us": "en", "en-gb": "en"}


@dataclass(frozen=True)
class Options:
    """The decoding options one request may choose; requests with equal Options share a decoding batch. `words`:
    how the request named them (`"beam": 2`), for messages; not compared."""

    beam: int
    n_best: int = 1
    words: tuple[tuple[str, str], ...] = field(default=(), compare=False)


def run_languages(run: Run, source: str | None, target: str | None) -> tuple[str, str]:
    """(source, target) codes: the flags, else the languages of the run's corpus (data.corpus.corpus_languages)."""
    corpus = getattr(run.train_config, "corpus", None)
    found = corpus_languages(corpus if isinstance(corpus, str) else None) or (None, None)
    source, target = source or found[0], target or found[1]
    if not source or not target:
        raise ConfigError(N_("cannot tell the languages of {path} (its train_config.json names no corpus like en-zh "
                             "or software): give --source and --target, e.g. --source en --target zh"),
                          path=run.path)
    return source, target


class RunTranslator:
    """A run and its Translator: the run's decoding.json with `flags` (serve's decoding flags, by option name; None
    or absent: the file's) over it, checked by the Translator as any other."""

    def __init__(self, run: Run, flags: Mapping[str, Any] | None = None) -> None:
        self.run = run
        self.translator = Translator(run, from_args(run.decoding, flags or {}).pick(n_best=1, align=False))
        self.options = self.translator.options
        self.engine = self.options.engine
        self._for: dict[Options, Translator] = {}
        prepare = getattr(self.translator.backend, "prepare_step", None)  # the torch engine's captured step:
        if prepare is not None:  # compiled in the background if not cached; the eager step answers meanwhile
            prepare(background=True)

    def step(self) -> str:
        """What decodes the server's beam now (the torch engine: "captured fp32", "compiling bf16", "eager fp32"
        ...), else the engine's name: /health says it."""
        in_use = getattr(self.translator.backend, "step_in_use", None)
        return in_use() if in_use is not None else self.engine

    def check(self, options: Options) -> Translator:
        """The Translator of a request's options, or a one-line error for options that cannot work (before they
        join a batch)."""
        if options not in self._for:
            picked = self.options.pick(named_as=dict(options.words), beam=options.beam, n_best=options.n_best)
            self._for[options] = Translator(self.run, picked, backend=self.translator.backend)
        return self._for[options]

    def translate(self, texts: list[str], options: Options) -> list[list[tuple[str, float | None]]]:
        """Per text, its hypotheses (text, score) best first: n_best of them (score None without n-best)."""
        out = self.check(options).translate(texts)
        if options.n_best == 1:  # the CLI's plain path (hypotheses only with --n-best > 1)
            return [[(t, None)] for t in out]
        return [[(h.text, h.score) for h in t.hyps] for t in out]

    def count_tokens(self, texts: list[str]) -> int:
        """Source tokens (with </s>) of `texts`: what max_batch_tokens counts."""
        return sum(len(ids) + 1 for ids in self.run.src_tok.encode_batch(texts))

    def attention(self, source: str, translation: str) -> dict:
        """The last decoder layer's cross-attention of `translation` (teacher-forced), averaged over heads."""
        from scratchformer.inspect.attention import cross_attention  # late: it imports matplotlib (seconds)

        weights, src_labels, tgt_labels = cross_attention(self.run, source, translation)  # (h, L_tgt, L_src)
        mean = weights.float().mean(0)  # (L_tgt, L_src)
        return {"source_tokens": src_labels, "target_tokens": tgt_labels,
                "weights": [[round(float(x), 4) for x in row] for row in mean]}

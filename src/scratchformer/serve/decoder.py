"""The serve room's decoding side: one loaded run that translates a batch of texts with the CLI's own functions
(`translate_texts` for --engine torch, `make_translator` for the others), so the service prints what
`scratchformer translate` prints for the same options."""

from __future__ import annotations

from dataclasses import dataclass

from scratchformer.data.corpus import corpus_languages
from scratchformer.decoding import translate_texts
from scratchformer.decoding.translate import check_translate_options, translate_with
from scratchformer.engines import make_translator
from scratchformer.errors import ConfigError, InputError
from scratchformer.runs import Run

# Names LibreTranslate's /languages gives the codes a run of ours may translate.
LANGUAGE_NAMES = {"en": "English", "zh": "Chinese", "de": "German", "fr": "French", "es": "Spanish", "it": "Italian",
                  "ja": "Japanese", "ko": "Korean", "ru": "Russian", "pt": "Portuguese", "nl": "Dutch",
                  "ar": "Arabic", "cs": "Czech", "ro": "Romanian", "tr": "Turkish", "vi": "Vietnamese"}
# Codes clients use for the same language (LibreTranslate >= 1.6 calls Simplified Chinese "zh-Hans").
ALIASES = {"zh-hans": "zh", "zh-cn": "zh", "zh_cn": "zh", "en-us": "en", "en-gb": "en"}


@dataclass(frozen=True)
class Options:
    """The decoding options one request may choose; requests with equal Options share a decoding batch."""

    beam: int
    n_best: int = 1


def run_languages(run: Run, source: str | None, target: str | None) -> tuple[str, str]:
    """(source, target) codes: the flags, else the languages of the run's corpus (data.corpus.corpus_languages)."""
    corpus = getattr(run.train_config, "corpus", None)
    found = corpus_languages(corpus if isinstance(corpus, str) else None) or (None, None)
    source, target = source or found[0], target or found[1]
    if not source or not target:
        raise ConfigError(f"cannot tell the languages of {run.path} (its train_config.json names no corpus like "
                          "en-zh or software): give --source and --target, e.g. --source en --target zh")
    return source, target


class RunTranslator:
    """A run, its engine and the server-wide decoding options (alpha, sentence splitting and copy repair: None
    takes the run's decoding.json; batch size, max_len)."""

    def __init__(self, run: Run, engine: str = "torch", alpha: float | None = None, batch_size: int = 32,
                 max_len: int | None = None, int8: bool = False, split_sentences: bool | None = None,
                 repair_copies: bool | None = None) -> None:
        if run.model_config.arch != "encoder-decoder":
            raise ConfigError(f"{run.path} holds a {run.model_config.arch} run, which does not translate: serve "
                              "an encoder-decoder (translation) run")
        if int8 and engine != "ctranslate2":  # as `translate --int8`: ctranslate2 quantizes its own export
            from scratchformer.decoding.quantize import quantize_int8

            run.model, run.members = quantize_int8(run.model), [quantize_int8(m) for m in run.members]
        self.decoding = run.decoding.pick(alpha=alpha, split_sentences=split_sentences, repair_copies=repair_copies)
        self.run, self.engine, self.alpha = run, engine, self.decoding.alpha
        self.batch_size, self.max_len = batch_size, max_len
        self.models = 1 + len(run.members) if engine == "torch" else 1  # decoded together: each holds a KV cache
        options = {"int8": True} if int8 and engine == "ctranslate2" else {}
        self.translator = make_translator(run, engine, **options) if engine != "torch" else None

    def check(self, options: Options) -> None:
        """A one-line error for options that cannot work (before they join a batch)."""
        if options.n_best > 1 and self.engine != "torch":
            raise InputError(f"alternatives: only --engine torch (our own decoder) gives n-best lists; this server "
                             f"decodes with {self.engine}")
        check_translate_options(self.run.model, options.beam, self.alpha, self.batch_size, None, self.max_len,
                                n_best=options.n_best, members=self.models)

    def translate(self, texts: list[str], options: Options) -> list[list[tuple[str, float | None]]]:
        """Per text, its hypotheses (text, score) best first: n_best of them (score None without n-best)."""
        d = self.decoding
        if self.translator is not None:
            translator = self.translator
            out = translate_with(lambda pieces: translator.translate(pieces, beam=options.beam, alpha=self.alpha,
                                                                     max_len=self.max_len, batch_size=self.batch_size),
                                 texts, d.split_sentences, d.repair_copies)
            return [[(t, None)] for t in out]
        r = self.run
        out = translate_texts(r.model, r.src_tok, r.tgt_tok, texts, beam=options.beam, alpha=self.alpha,
                              batch_size=self.batch_size, max_len=self.max_len, n_best=options.n_best,
                              split_sentences=d.split_sentences, repair_copies=d.repair_copies,
                              ensemble=r.members)
        if options.n_best == 1:  # the CLI's plain path (return_hyps only with --n-best > 1)
            return [[(t, None)] for t in out]
        return [[(h.text, h.score) for h in t.hyps] for t in out]

    def count_tokens(self, texts: list[str]) -> int:
        """Source tokens (with </s>) of `texts`: what --max-batch-tokens counts."""
        return sum(len(ids) + 1 for ids in self.run.src_tok.encode_batch(texts))

    def attention(self, source: str, translation: str) -> dict:
        """The last decoder layer's cross-attention of `translation` (teacher-forced), averaged over heads."""
        from scratchformer.inspect.attention import cross_attention  # late: it imports matplotlib (seconds)

        weights, src_labels, tgt_labels = cross_attention(self.run, source, translation)  # (h, L_tgt, L_src)
        mean = weights.float().mean(0)  # (L_tgt, L_src)
        return {"source_tokens": src_labels, "target_tokens": tgt_labels,
                "weights": [[round(float(x), 4) for x in row] for row in mean]}

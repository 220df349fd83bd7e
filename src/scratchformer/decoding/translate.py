"""Text in, text out for a bare model and its tokenizers: the compatibility face of the one pipeline.

    translate_texts(model, src_tok, tgt_tok, ["Hello."]) -> ["你好。"]          beam 4, alpha 0.6: DecodingOptions()
    translate_texts(..., options=run.decoding, beam=1)                          a run's options, one of them changed
    translate_texts(..., n_best=4) / (..., align=True) / (..., return_hyps=True) -> [Translation, ...] (results.py)

A trained run is translated with `engines.Translator(run, options).translate(texts)`, which picks the engine;
this function is that pipeline (pipeline.py) on our own search (search.py), for code that holds a model rather
than a run (training's end-of-run report, the lab). Its defaults are DecodingOptions' (the CLI's when the run's
decoding.json says nothing), no longer beam 1.
"""

from __future__ import annotations

import warnings
from collections.abc import Sequence
from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.tokenizers import Tokenizer
from scratchformer.decoding.pipeline import check_texts, prefix_ids, run_pipeline  # noqa: F401 (prefix_ids: API)
from scratchformer.decoding.results import Translation
from scratchformer.decoding.search import TorchSearch
from scratchformer.errors import InputError
from scratchformer.model.transformer import EncoderDecoder


def check_translates(model: object) -> None:
    """A one-line InputError for a model that does not translate (a decoder or encoder, or not a model)."""
    arch = getattr(getattr(model, "config", None), "arch", None)
    if arch != "encoder-decoder":
        raise InputError(f"translation needs an encoder-decoder model, got a {arch or type(model).__name__} one")


def translate_texts(model: EncoderDecoder, src_tok: Tokenizer, tgt_tok: Tokenizer, texts: Sequence[str],
                    options: DecodingOptions | None = None, *, prefix: str | Sequence[str | None] | None = None,
                    return_hyps: bool = False, ensemble: Sequence[EncoderDecoder] = (), progress: bool = False,
                    **changes: Any) -> list[str] | list[Translation]:
    """Translate `texts`, in order, with `options` (default DecodingOptions()) and any option given by name in
    `changes` (beam=1, alpha=1.5, max_len=10, n_best=3, split_sentences=True, ...; config/decoding.py says each).
    prefix: target text forced at the start of every output (a str), or one per text (None or "" for none); a
    split paragraph's prefix starts its first sentence. Returns list[str], or with n_best > 1, align or
    return_hyps one Translation per text. ensemble: more models with the same vocabularies, whose probabilities
    are averaged with `model`'s at every step (search.py)."""
    texts = check_texts(texts)
    check_translates(model)
    options = (options or DecodingOptions()).pick(**changes)
    if options.step == "captured":  # packages are the torch engine's (engines/torch_engine.py), keyed by the run
        warnings.warn("translate_texts runs the eager step; step='captured' is chosen by "
                      "scratchformer.engines.Translator(run, options)", stacklevel=2)
    search = TorchSearch(model, ensemble, int8=options.int8)
    options.check_model(model.config, members=search.models)
    structured = options.n_best > 1 or options.align or return_hyps
    return run_pipeline(search, src_tok, tgt_tok, model.config.max_len, texts, options, prefix, structured,
                        progress)

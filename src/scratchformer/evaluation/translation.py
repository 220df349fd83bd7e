"""Evaluate a translation (encoder-decoder) run on a split of its corpus: sacreBLEU and chrF (with signatures),
exact match, timing, and for Chinese targets two checks that the model uses its source."""

from __future__ import annotations

import time
from pathlib import Path
from typing import Any

from scratchformer.data.corpus import load_pairs
from scratchformer.errors import ConfigError, ScratchformerError
from scratchformer.runs import Run, load_run


def evaluate_pairs(run: Run, pairs: list[tuple[str, str]], beam: int = 1, alpha: float | None = None,
                   show: int = 0, train_targets: list[str] | None = None, engine: str = "torch",
                   explain: bool = False, split_sentences: bool | None = None,
                   repair_copies: bool | None = None, confidence: int = 0) -> dict[str, Any]:
    """BLEU, chrF, exact match and time; for Chinese targets also the spurious-quote rate and, given the training
    targets, the share of unseen character 4-grams in the outputs and in the references. explain: BLEU taken
    apart too (metrics.bleu_explained), under "bleu_explained". alpha, split_sentences, repair_copies: None takes
    the run's own (decoding.json, config/decoding.py); the result says which were used. Every engine splits and
    repairs (decoding/translate.py: translate_with). confidence N > 1: "bleu_ci95", half the 95% interval of BLEU
    over N bootstrap resamples of the sentences (metrics.bleu)."""
    from scratchformer.decoding.translate import translate_with
    from scratchformer.engines import make_translator
    from scratchformer.evaluation.metrics import (
        bleu,
        bleu_explained,
        chrf,
        exact_match,
        has_cjk,
        spurious_quote_rate,
        unseen_ngram_rate,
    )

    decoding = run.decoding.pick(alpha=alpha, split_sentences=split_sentences, repair_copies=repair_copies)
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translator = make_translator(run, engine)
    start = time.time()
    hyps = translate_with(lambda texts: translator.translate(texts, beam=beam, alpha=decoding.alpha), sources,
                          decoding.split_sentences, decoding.repair_copies)
    seconds = time.time() - start
    b, c = bleu(hyps, refs, n_bootstrap=max(confidence, 1)), chrf(hyps, refs)
    result: dict[str, Any] = {
        "sentences": len(pairs), "beam": beam, "bleu": round(b["score"], 2),
        **({"bleu_ci95": round(b["ci95"], 2)} if "ci95" in b else {}), "chrf": round(c["score"], 2),
        "exact_match": round(exact_match(hyps, refs), 4), "seconds": round(seconds, 1), **decoding.options(),
        **({"ensemble_size": 1 + len(run.members)} if run.members and engine == "torch" else {}),
        "bleu_signature": b["signature"], "chrf_signature": c["signature"],
    }
    if has_cjk(refs):
        result["spurious_quote_rate"] = round(spurious_quote_rate(hyps, refs), 4)
        if train_targets:
            result["unseen_4grams_hyp"] = round(unseen_ngram_rate(hyps, train_targets), 4)
            result["unseen_4grams_ref"] = round(unseen_ngram_rate(refs, train_targets), 4)
    if explain:
        result["bleu_explained"] = bleu_explained(hyps, refs)
    if show:
        result["samples"] = [{"src": s, "ref": r, "hyp": h} for s, r, h in list(zip(sources, refs, hyps))[:show]]
    return result


def evaluate_run(run_dir: str | Path, split: str = "test", beam: int = 1, alpha: float | None = None,
                 limit: int | None = None, show: int = 0, corpus: str | None = None,
                 weights: str | Path | None = None, engine: str = "torch", explain: bool = False,
                 split_sentences: bool | None = None, repair_copies: bool | None = None,
                 confidence: int = 0, ensemble: list[str] | None = None) -> dict[str, Any]:
    """Translation scores of a run on `split` of its training corpus (or of `corpus`), the first `limit` pairs;
    decoding options left None are the run's own (decoding.json); confidence: evaluate_pairs'; ensemble: more
    members' weights (load_run; None: decoding.json's)."""
    if ensemble and engine != "torch":
        raise ConfigError(f"--ensemble: only --engine torch (our own decoder) decodes an ensemble, not {engine}")
    run = load_run(run_dir, weights, ensemble=ensemble)
    if run.model_config.arch != "encoder-decoder":
        raise ConfigError(f"{run_dir} holds a {run.model_config.arch} model: translation metrics need an "
                          "encoder-decoder (use `scratchformer evaluate --task lm` for perplexity)")
    source = corpus or (run.train_config.corpus if run.train_config else None)
    if source is None:
        raise ConfigError(f"{run_dir} has no train_config.json naming its corpus: pass --corpus")
    holdout = run.train_config.holdout if run.train_config and not corpus else "none"  # the run's own splits
    pairs = load_pairs(source, split, on_error="skip", holdout=holdout)
    if limit:
        pairs = pairs[:limit]
    return {"run_dir": str(run_dir), "corpus": source, "split": split,
            **evaluate_pairs(run, pairs, beam, alpha, show, train_targets(run), engine, explain, split_sentences,
                             repair_copies, confidence)}


def train_targets(run: Run) -> list[str] | None:
    """The target side of the corpus the run was trained on, if it can still be read (else no n-gram figure)."""
    trained_on = run.train_config.corpus if run.train_config else None
    if trained_on is None:
        return None
    try:
        return [t for _, t in load_pairs(trained_on, "train", on_error="skip", holdout=run.train_config.holdout)]
    except ScratchformerError:  # a user's corpus file that has moved since: evaluation goes on without it
        return None


"""Evaluate a translation (encoder-decoder) run on a split of its corpus: sacreBLEU and chrF (with signatures),
exact match, timing, and for Chinese targets two checks that the model uses its source."""

from __future__ import annotations

import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from scratchformer.config.decoding import DecodingOptions
from scratchformer.data.corpus import load_pairs
from scratchformer.errors import N_, ConfigError, ScratchformerError
from scratchformer.runs import Run, load_run


def evaluate_pairs(run: Run, pairs: list[tuple[str, str]], options: DecodingOptions | None = None, *, show: int = 0,
                   train_targets: list[str] | None = None, explain: bool = False, confidence: int = 0,
                   progress: bool = False, **changes: Any) -> dict[str, Any]:
    """BLEU, chrF, exact match and time; for Chinese targets also the spurious-quote rate and, given the training
    targets, the share of unseen character 4-grams in the outputs and in the references. The sources are translated
    by engines.Translator with `options` (default: the run's decoding.json) and any option named in `changes`
    (beam=2, engine="ctranslate2", split_sentences=False, ...); the result says which were used. explain: BLEU
    taken apart too (metrics.bleu_explained), under "bleu_explained". confidence N > 1: "bleu_ci95", half the 95%
    interval of BLEU over N bootstrap resamples of the sentences (metrics.bleu). progress: a bar with an ETA.
    dtype auto decodes in fp32 here (a bf16 CPU would otherwise score another model's outputs); an explicit bf16
    is kept."""
    from scratchformer.engines import Translator
    from scratchformer.evaluation.metrics import (
        bleu,
        bleu_explained,
        chrf,
        exact_match,
        has_cjk,
        spurious_quote_rate,
        unseen_ngram_rate,
    )

    decoding = (options or run.decoding).pick(**changes)
    if decoding.dtype == "auto":  # a score is the model's, not this CPU's: auto's bf16 would move it by ~0.1 BLEU
        decoding = decoding.pick(dtype="fp32")
    sources, refs = [s for s, _ in pairs], [t for _, t in pairs]
    translator = Translator(run, decoding)
    start = time.time()
    hyps = translator.translate(sources, progress=progress)
    seconds = time.time() - start
    b, c = bleu(hyps, refs, n_bootstrap=max(confidence, 1)), chrf(hyps, refs)
    result: dict[str, Any] = {
        "sentences": len(pairs), "beam": decoding.beam, "bleu": round(b["score"], 2),
        **({"bleu_ci95": round(b["ci95"], 2)} if "ci95" in b else {}), "chrf": round(c["score"], 2),
        "exact_match": round(exact_match(hyps, refs), 4), "seconds": round(seconds, 1), **decoding.options(),
        "dtype": decoding.dtype,
        **({"ensemble_size": 1 + len(run.members)} if run.members and decoding.engine == "torch" else {}),
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


@dataclass(frozen=True)
class Scoring:
    """What evaluate_run measures beyond BLEU, chrF and exact match (evaluate_pairs says each)."""

    explain: bool = False
    confidence: int = 0
    progress: bool = False


def evaluate_run(run_dir: str | Path, split: str = "test", limit: int | None = None, show: int = 0,
                 corpus: str | None = None, weights: str | Path | None = None, ensemble: list[str] | None = None,
                 scoring: Scoring = Scoring(), **changes: Any) -> dict[str, Any]:
    """Translation scores of a run on `split` of its training corpus (or of `corpus`), the first `limit` pairs;
    the decoding options are the run's own (decoding.json) with `changes` (beam=1, engine=..., any option)
    laid over them; scoring: explain, confidence, progress (evaluate_pairs'); ensemble: more members' weights
    (load_run; None: decoding.json's). The options are checked where the Translator is made (the architecture
    too)."""
    if ensemble and changes.get("engine") not in (None, "torch"):
        raise ConfigError(N_("--ensemble: only --engine torch (our own decoder) decodes an ensemble, not {engine}"),
                          engine=changes["engine"])
    run = load_run(run_dir, weights, ensemble=ensemble)
    source = corpus or (run.train_config.corpus if run.train_config else None)
    if source is None:
        raise ConfigError(N_("{run_dir} has no train_config.json naming its corpus: pass --corpus"), run_dir=run_dir)
    holdout = run.train_config.holdout if run.train_config and not corpus else "none"  # the run's own splits
    pairs = load_pairs(source, split, on_error="skip", holdout=holdout)
    if limit:
        pairs = pairs[:limit]
    return {"run_dir": str(run_dir), "corpus": source, "split": split,
            **evaluate_pairs(run, pairs, show=show, train_targets=train_targets(run), explain=scoring.explain,
                             confidence=scoring.confidence, progress=scoring.progress, **changes)}


def train_targets(run: Run) -> list[str] | None:
    """The target side of the corpus the run was trained on, if it can still be read (else no n-gram figure)."""
    trained_on = run.train_config.corpus if run.train_config else None
    if trained_on is None:
        return None
    try:
        return [t for _, t in load_pairs(trained_on, "train", on_error="skip", holdout=run.train_config.holdout)]
    except ScratchformerError:  # a user's corpus file that has moved since: evaluation goes on without it
        return None


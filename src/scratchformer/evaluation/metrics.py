"""Scores: sacreBLEU BLEU and chrF on detokenized text, exact match, and language-model perplexity.

    bleu(hyps, refs)         -> {"score": 27.3, "signature": "nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|..."}
    chrf(hyps, refs)         -> {"score": 55.1, "signature": "..."}
    exact_match(hyps, refs)  -> fraction of hypotheses equal to their reference (whitespace at the ends ignored)
    perplexity(model, batches) -> exp(mean NLL per non-pad target token)

BLEU is corpus-level and always comes with its signature, so numbers can be compared. Chinese (any CJK
in the references) is scored with sacreBLEU's `zh` tokenizer, everything else with `13a` (WMT's default).
"""

from __future__ import annotations

import math
import re
from collections.abc import Iterable, Mapping, Sequence

import torch
from sacrebleu.metrics import BLEU, CHRF
from torch import Tensor, nn
from torch.nn import functional as F

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise ValueError("hyps and refs must be lists of strings, one per sentence, not a single string")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: give one reference per hypothesis")


def has_cjk(texts: Iterable[str]) -> bool:
    return any(_CJK.search(t) for t in texts)


def bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str | None = None) -> dict[str, float | str]:
    """Corpus BLEU of detokenized hyps against one reference each. tokenize None: "zh" if refs hold CJK, else "13a"."""
    _check(hyps, refs)
    tokenize = tokenize or ("zh" if has_cjk(refs) else "13a")
    metric = BLEU(tokenize=tokenize)
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {"score": score.score, "signature": str(metric.get_signature())}


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float | str]:
    """Corpus chrF (character n-gram F-score, beta = 2) against one reference each."""
    _check(hyps, refs)
    metric = CHRF()
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {"score": score.score, "signature": str(metric.get_signature())}


def exact_match(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Fraction in [0, 1] of hypotheses identical to their reference after stripping the ends; 0.0 if empty."""
    _check(hyps, refs)
    if not hyps:
        return 0.0
    return sum(h.strip() == r.strip() for h, r in zip(hyps, refs)) / len(hyps)


@torch.inference_mode()
def perplexity(model: nn.Module, batches: Iterable[Mapping[str, Tensor] | Tensor]) -> float:
    """exp(mean NLL over non-pad target tokens) of `model` on `batches`.

    A DecoderOnly takes `data.batching.collate_lm` dicts (input_ids, labels) or (B, L) id tensors padded with
    pad_id on the right (shifted here); an EncoderDecoder takes `collate_pairs` dicts (src, tgt_in, tgt_out).
    """
    pad = model.config.pad_id
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    total, count = 0.0, 0
    try:
        for batch in batches:
            if isinstance(batch, Tensor):
                batch = {"input_ids": batch[:, :-1], "labels": batch[:, 1:]}
            if "src" in batch:
                logits = model(batch["src"].to(device), batch["tgt_in"].to(device))  # (B, L, V)
                labels = batch["tgt_out"].to(device)  # (B, L)
            else:
                logits = model(batch["input_ids"].to(device))  # (B, L, V); right padding needs no mask
                labels = batch["labels"].to(device)
            nll = F.cross_entropy(logits.float().flatten(0, 1), labels.flatten(), ignore_index=pad, reduction="sum")
            total += float(nll)
            count += int((labels != pad).sum())
    finally:
        model.train(was_training)
    if count == 0:
        raise ValueError("no non-pad target tokens in the batches: perplexity is undefined")
    return math.exp(total / count)


# -- does the model use its source? (a model that ignores the source writes fluent training-corpus text) -------

QUOTES = "「」"  # LibreOffice's help quotes UI names this way; other projects rarely do


def spurious_quote_rate(hyps: Sequence[str], refs: Sequence[str]) -> float:
    """Share of the sentences whose reference has no 「」 quotes but whose output has some (0.0 when every
    reference has quotes)."""
    _check(hyps, refs)
    unquoted = [h for h, r in zip(hyps, refs) if not any(q in r for q in QUOTES)]
    return sum(any(q in h for q in QUOTES) for h in unquoted) / len(unquoted) if unquoted else 0.0


def char_ngrams(text: str, n: int) -> set[str]:
    """The character n-grams of `text` with whitespace removed (Chinese has no words to count)."""
    s = "".join(text.split())
    return {s[i : i + n] for i in range(len(s) - n + 1)}


def unseen_ngram_rate(texts: Sequence[str], corpus_targets: Iterable[str], n: int = 4) -> float:
    """Share of the character n-grams of `texts` that occur in no sentence of `corpus_targets` (e.g. the
    training targets). Compare the outputs' rate with the references': far below it means the model reproduces
    training phrases instead of translating what it is given."""
    seen: set[str] = set()
    for t in corpus_targets:
        seen |= char_ngrams(t, n)
    grams = [g for t in texts for g in char_ngrams(t, n)]
    return sum(g not in seen for g in grams) / len(grams) if grams else 0.0

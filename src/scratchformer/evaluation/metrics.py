"""Scores: sacreBLEU BLEU and chrF on detokenized text, exact match, and language-model perplexity.

    bleu(hyps, refs)         -> {"score": 27.3, "signature": "nrefs:1|case:mixed|eff:no|tok:zh|smooth:exp|..."}
    bleu(hyps, refs, n_bootstrap=1000) -> the same, plus "ci95": 4.7 (half the 95% bootstrap interval), "mean"
    chrf(hyps, refs)         -> {"score": 55.1, "signature": "..."}; sentence_chrf(hyp, ref) -> 61.2
    bleu_explained(hyps, refs) -> BLEU taken apart (n-gram precisions, brevity penalty), seed 001's simple BLEU
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

from scratchformer.errors import N_, ConfigError

BOOTSTRAP_RESAMPLES = 1000  # sacreBLEU's --confidence-n default
MAX_BOOTSTRAP_RESAMPLES = 10_000  # each resample scores the whole test set again: 1e9 of them never end

_CJK = re.compile(r"[\u3400-\u4dbf\u4e00-\u9fff\uf900-\ufaff\u3040-\u30ff\uac00-\ud7af]")


def _check(hyps: Sequence[str], refs: Sequence[str]) -> None:
    if isinstance(hyps, str) or isinstance(refs, str):
        raise ValueError("hyps and refs must be lists of strings, one per sentence, not a single string")
    if len(hyps) != len(refs):
        raise ValueError(f"{len(hyps)} hypotheses but {len(refs)} references: give one reference per hypothesis")


def has_cjk(texts: Iterable[str]) -> bool:
    return any(_CJK.search(t) for t in texts)


def bleu(hyps: Sequence[str], refs: Sequence[str], tokenize: str | None = None,
         n_bootstrap: int = 1) -> dict[str, float | str]:
    """Corpus BLEU of detokenized hyps against one reference each. tokenize None: "zh" if refs hold CJK, else "13a".

    n_bootstrap > 1: sacreBLEU's bootstrap resampling of the sentences (its `--confidence`, Koehn 2004), with
    its fixed seed (SACREBLEU_SEED, else 12345), so the same outputs give the same interval: "ci95" is half the
    width of the 95% interval of the resampled scores and "mean" their mean; the signature names bs and seed."""
    _check(hyps, refs)
    if not 1 <= n_bootstrap <= MAX_BOOTSTRAP_RESAMPLES:
        raise ConfigError(N_("n_bootstrap={n}: give 1 (no resampling) or the number of resamples, at most {most:,} "
                             "(1000 is usual)"), n=n_bootstrap, most=MAX_BOOTSTRAP_RESAMPLES)
    tokenize = tokenize or ("zh" if has_cjk(refs) else "13a")
    metric = BLEU(tokenize=tokenize)
    score = metric.corpus_score(list(hyps), [list(refs)], n_bootstrap=n_bootstrap)
    result: dict[str, float | str] = {"score": score.score, "signature": str(metric.get_signature())}
    if n_bootstrap > 1:
        result.update(ci95=score._ci, mean=score._mean)  # sacreBLEU keeps them private; its CLI prints them
    return result


def chrf(hyps: Sequence[str], refs: Sequence[str]) -> dict[str, float | str]:
    """Corpus chrF (character n-gram F-score, beta = 2) against one reference each."""
    _check(hyps, refs)
    metric = CHRF()
    score = metric.corpus_score(list(hyps), [list(refs)])
    return {"score": score.score, "signature": str(metric.get_signature())}


def sentence_chrf(hyp: str, ref: str) -> float:
    """chrF of one sentence against its reference (the corpus chrF's settings), 0 to 100."""
    return CHRF().sentence_score(hyp, [ref]).score


def chrf_signature() -> str:
    """The signature of the chrF that `chrf` computes with one reference per sentence (sacreBLEU fills in
    nrefs only after a scoring, so one is made)."""
    metric = CHRF()
    metric.corpus_score(["a"], [["a"]])
    return str(metric.get_signature())


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


# -- BLEU taken apart (`evaluate --explain`) ---------------------------------------------------------------------


def seed_simple_bleu(reference: str, candidate: str) -> float:
    """Seed 001's "simple BLEU" of one sentence, as it wrote it: clipped character-unigram precision times
    min(1, len(ref) / len(cand)). In [0, 1]."""
    ref, cand = list(reference), list(candidate)
    if not cand:
        return 0.0
    matches = sum(min(ref.count(t), cand.count(t)) for t in set(cand))
    return matches / len(cand) * min(1.0, len(ref) / len(cand))


def bleu_explained(hyps: Sequence[str], refs: Sequence[str], tokenize: str | None = None) -> dict:
    """sacreBLEU's corpus BLEU taken apart from its own statistics: clipped n-gram matches and precisions
    (n = 1..4), the brevity penalty, and the two recombined (it must give sacreBLEU's score); beside it seed 001's
    unigram "simple BLEU" (mean over sentences, x100), also of the outputs with their characters shuffled."""
    _check(hyps, refs)
    tokenize = tokenize or ("zh" if has_cjk(refs) else "13a")
    metric = BLEU(tokenize=tokenize)
    s = metric.corpus_score(list(hyps), [list(refs)])
    c, r = s.sys_len, s.ref_len
    bp = 1.0 if c >= r else (math.exp(1 - r / c) if c else 0.0)  # the paper's BP: only short output pays
    logs = [math.log(p / 100) for p in s.precisions if p > 0]
    geo = 100 * math.exp(sum(logs) / 4) if len(logs) == 4 else 0.0  # geometric mean of p1..p4, in percent
    shuffled = [_shuffled(h, i) for i, h in enumerate(hyps)]
    n = max(len(hyps), 1)
    return {
        "score": s.score, "signature": str(metric.get_signature()),
        "ngrams": [{"n": i + 1, "matches": s.counts[i], "total": s.totals[i], "precision": s.precisions[i]}
                   for i in range(4)],
        "hyp_len": c, "ref_len": r, "brevity_penalty": bp, "geometric_mean": geo, "recombined": bp * geo,
        "simple_bleu": 100 * sum(seed_simple_bleu(rf, h) for h, rf in zip(hyps, refs)) / n,
        "shuffled_bleu": metric.corpus_score(shuffled, [list(refs)]).score,
        "shuffled_simple_bleu": 100 * sum(seed_simple_bleu(rf, h) for h, rf in zip(shuffled, refs)) / n,
        "shorter_than_ref": sum(len(h) < len(rf) for h, rf in zip(hyps, refs)),
        "longer_than_ref": sum(len(h) > len(rf) for h, rf in zip(hyps, refs)), "sentences": len(hyps),
    }


def _shuffled(text: str, seed: int) -> str:
    """The characters of `text` in a fixed random order: the same bag of unigrams, the order gone."""
    import random

    chars = list(text)
    random.Random(seed).shuffle(chars)
    return "".join(chars)


def format_bleu_explained(e: dict) -> str:
    """The explanation as lines of text, every figure from `e` (bleu_explained); in the language of `_()`."""
    from scratchformer.i18n import _

    tokenizer = e["signature"].split("tok:")[1].split("|")[0]
    lines = [_("BLEU = BP x (p1 p2 p3 p4)^(1/4), n-grams clipped by the reference, counted over the whole corpus "
               "(tokenizer {tokenizer}):").format(tokenizer=tokenizer)]
    for g in e["ngrams"]:
        lines.append(f"  p{g['n']} = {g['matches']:>7} / {g['total']:<7} = {g['precision']:6.2f}%")
    bp = (_("1 (not shorter)") if e["hyp_len"] >= e["ref_len"] else
          f"exp(1 - {e['ref_len']}/{e['hyp_len']}) = {e['brevity_penalty']:.4f}")
    lines += [
        _("  geometric mean (p1 p2 p3 p4)^(1/4) = {mean:.2f}%").format(mean=e["geometric_mean"]),
        _("  brevity penalty: output {hyp_len} tokens, references {ref_len}: BP = {bp}").format(
            hyp_len=e["hyp_len"], ref_len=e["ref_len"], bp=bp),
        _("  BP x mean = {recombined:.2f}   sacreBLEU's own score: {score:.2f}   ({signature})").format(**e),
        "",
        _("seed 001's simple BLEU (clipped character unigrams x min(1, ref/out), mean of sentences): "
          "{simple_bleu:.2f}. Why it differs:").format(**e),
        _("  - unigrams only: the order does not count. Shuffle each output's characters: simple BLEU "
          "{shuffled_simple_bleu:.2f}, real BLEU {shuffled_bleu:.2f} (p2-p4 collapse).").format(**e),
        _("  - its penalty punishes LONG output (min(1, ref/out); {longer_than_ref} of {sentences} outputs are "
          "longer), which the precision already does; BLEU's BP punishes SHORT output ({shorter_than_ref} are "
          "shorter), which precision alone rewards.").format(**e),
        _("  - it averages sentence scores; BLEU adds up the counts of the whole corpus first, then divides."),
    ]
    return "\n".join(lines)

"""Evaluate encoder (BERT-like) runs: classification accuracy next to the majority-class baseline, and
masked-token accuracy / perplexity of an MLM.

    evaluate_encoder("runs/classify-demo", split="test")
      -> {"accuracy": 0.71, "majority_class": "calc", "majority_accuracy": 0.34, "sentences": 583, ...}

The majority class is the most frequent label of the run's TRAIN split (what a model that learned nothing
but the label counts would always answer); its accuracy is measured on the evaluated split.
"""

from __future__ import annotations

import math
from collections import Counter
from collections.abc import Sequence
from pathlib import Path
from typing import Any

import torch
from torch import nn
from torch.nn import functional as F

from scratchformer.data.batching import encode_sentences, token_batches
from scratchformer.data.corpus import load_pairs, load_text
from scratchformer.data.masking import MASK, collate_mlm, pad_right
from scratchformer.data.tokenizers import PAD_ID, Tokenizer
from scratchformer.errors import N_, ConfigError

EVAL_MAX_TOKENS = 8192  # padded tokens per inference batch


def _batches(seqs: Sequence[Sequence[int]]) -> list[list[int]]:
    return token_batches([len(s) for s in seqs], EVAL_MAX_TOKENS, shuffle=False, seed=0) if seqs else []


@torch.inference_mode()
def predict_classes(model: nn.Module, seqs: Sequence[Sequence[int]]) -> list[int]:
    """Predicted class index of each encoded sentence (batched by length, returned in input order)."""
    device = next(model.parameters()).device
    was_training = model.training
    model.eval()
    out = [0] * len(seqs)
    try:
        for idx in _batches(seqs):
            logits = model(pad_right([seqs[i] for i in idx]).to(device))  # (B, K)
            for i, k in zip(idx, logits.argmax(-1).tolist()):
                out[i] = k
    finally:
        model.train(was_training)
    return out


@torch.inference_mode()
def mlm_scores(model: nn.Module, seqs: Sequence[Sequence[int]], mask_id: int, seed: int = 0) -> dict[str, float]:
    """Masked-token accuracy and perplexity on `seqs`, masked 80/10/10 by a generator seeded with `seed`."""
    device = next(model.parameters()).device
    generator = torch.Generator().manual_seed(seed)
    vocab = model.config.tgt_vocab_size
    was_training = model.training
    model.eval()
    nll = correct = n = 0.0
    try:
        for idx in _batches(seqs):
            batch = collate_mlm([seqs[i] for i in idx], mask_id, vocab, generator)
            select = batch["labels"] != PAD_ID  # (B, L)
            logits = model(batch["input_ids"].to(device), select=select.to(device))  # (n, V)
            target = batch["labels"][select].to(device)  # (n,)
            nll += float(F.cross_entropy(logits.float(), target, reduction="sum"))
            correct += int((logits.argmax(-1) == target).sum())
            n += target.numel()
    finally:
        model.train(was_training)
    if n == 0:
        raise ConfigError(N_("no maskable tokens in the evaluated sentences"))
    return {"masked_tokens": int(n), "masked_accuracy": round(correct / n, 4), "mlm_ppl": round(math.exp(nll / n), 2)}


def classification_report(model: nn.Module, tok: Tokenizer, pairs: Sequence[tuple[str, str]],
                          train_labels: Sequence[str], max_len: int) -> dict[str, Any]:
    """Accuracy of `model` on (text, label) pairs next to the train split's majority class."""
    labels = list(model.config.labels)
    unknown = sorted({y for _, y in pairs} - set(labels))
    if unknown:
        raise ConfigError(N_("labels {unknown} are not among the model's classes {labels}"), unknown=unknown[:3],
                          labels=labels)
    predicted = predict_classes(model, encode_sentences(tok, [t for t, _ in pairs], max_len))
    gold = [labels.index(y) for _, y in pairs]
    majority = Counter(train_labels).most_common(1)[0][0]
    n = max(len(pairs), 1)
    return {"sentences": len(pairs), "accuracy": round(sum(p == g for p, g in zip(predicted, gold)) / n, 4),
            "majority_class": majority, "majority_accuracy": round(sum(y == majority for _, y in pairs) / n, 4)}


def evaluate_encoder(run_dir: str | Path, split: str = "test", weights: str | Path | None = None,
                     corpus: str | None = None) -> dict[str, Any]:
    """Accuracy vs majority baseline (classification run) or masked-token scores (mlm run) on a split."""
    from scratchformer.runs import load_run

    run = load_run(run_dir, weights)
    head = run.model_config.head
    tc = run.train_config
    source = corpus or (tc.corpus if tc else None)
    if source is None:
        raise ConfigError(N_("{run_dir} has no train_config.json naming its corpus: pass --corpus"), run_dir=run_dir)
    max_len = min(tc.max_sentence_len if tc else run.model_config.max_positions, run.model_config.max_positions)
    result: dict[str, Any] = {"run_dir": str(run_dir), "corpus": source, "split": split}
    holdout = tc.holdout if tc and not corpus else "none"  # the run's own splits of a one-file corpus
    if head == "classification":
        pairs = load_pairs(source, split, on_error="skip", holdout=holdout)
        trained_on = tc.corpus if tc else source  # the majority class is the one of the run's own train split
        train_labels = [y for _, y in load_pairs(trained_on, "train", on_error="skip",
                                                     holdout=tc.holdout if tc else "none")]
        return {**result, **classification_report(run.model, run.tgt_tok, pairs, train_labels, max_len)}
    if head == "mlm":
        mask_id = run.model_config.mask_id if run.model_config.mask_id is not None else run.tgt_tok.token_to_id(MASK)
        texts = load_text(source, split, side=tc.text_side if tc else "both", on_error="skip", holdout=holdout)
        seqs = [s for s in encode_sentences(run.tgt_tok, texts, max_len) if len(s) > 2]
        return {**result, "sentences": len(seqs),
                **mlm_scores(run.model, seqs, mask_id, seed=tc.seed if tc else 0)}
    raise ConfigError(N_("{run_dir} holds an encoder without a task head: nothing to evaluate (train one with "
                         "`scratchformer train --task mlm` or `--task classify`)"), run_dir=run_dir)

"""Sentence classification (BERT fine-tuning): `text<TAB>label` lines of `cfg.corpus` (splits train / valid /
test) -> EncoderForClassification (the <s> token's vector -> pooler -> K classes); plain cross-entropy per
sentence (label smoothing is not applied). `cfg.init` = a run directory (an mlm run, or any encoder run) whose
tokenizer and encoder weights start the training; without it the tokenizer is trained on the labelled train
split. After training: accuracy on valid and test next to the majority-class baseline."""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor
from torch.nn import functional as F

from scratchformer.config import ModelConfig
from scratchformer.data.batching import encode_sentences
from scratchformer.data.masking import pad_right
from scratchformer.errors import N_, ConfigError
from scratchformer.evaluation.encoder import classification_report
from scratchformer.training.loss import LossOutput
from scratchformer.training.tasks.encoder import EncoderTask, load_encoder_weights


def classification_loss(logits: Tensor, labels: Tensor) -> LossOutput:
    """logits (B, K), labels (B,) class indices -> cross-entropy, as a LossOutput counting sentences."""
    nll = F.cross_entropy(logits.float(), labels, reduction="none")  # (B,)
    return LossOutput(nll.mean(), nll.sum(), nll.detach().sum(), labels.numel())


class ClassificationTask(EncoderTask):
    name, head = "classify", "classification"

    def setup(self, resume: bool) -> ModelConfig:
        cfg = self.cfg
        pairs = self.pairs("train")
        texts, labels = [t for t, _ in pairs], sorted({y for _, y in pairs})
        if len(labels) < 2:
            raise ConfigError(N_("{corpus}: the train split has {n_labels} label(s); classification needs "
                                 "`text<TAB>label` lines with 2 or more labels"), corpus=cfg.corpus,
                              n_labels=len(labels))
        config = self.encoder_setup(resume, texts, labels)
        self.labels = list(config.labels or [])
        self.load_examples(pairs, sentences=True)
        return config

    def examples(self, split: str, loaded: list | None = None) -> list:
        cfg = self.cfg
        pairs = loaded if loaded is not None else self.pairs(split)
        unknown = sorted({y for _, y in pairs} - set(self.labels))
        if unknown:
            raise ConfigError(N_("{corpus} ({split}): labels {unknown} do not occur in the train split"),
                              corpus=cfg.corpus, split=split, unknown=unknown[:3])
        seqs = encode_sentences(self.tgt_tok, [t for t, _ in pairs], cfg.max_sentence_len)
        return [(s, self.labels.index(y)) for s, (_, y) in zip(seqs, pairs)]

    def lengths(self, examples: list) -> list:
        return [len(s) for s, _ in examples]

    def collate(self, examples: list) -> dict[str, Tensor]:
        return {"input_ids": pad_right([s for s, _ in examples]),
                "labels": torch.tensor([y for _, y in examples]), "n_tokens": torch.tensor(len(examples))}

    def after_build(self, model: torch.nn.Module) -> None:
        if self.cfg.init:
            path = load_encoder_weights(model.base, Path(self.cfg.init))
            self.log(N_("encoder weights from {path}"), path=path)

    def logits_and_loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, LossOutput]:
        logits = model(batch["input_ids"])  # (B, K)
        return logits, batch["labels"], classification_loss(logits, batch["labels"])

    def final_report(self, model: torch.nn.Module) -> dict[str, Any]:
        cfg, report = self.cfg, {}
        train_labels = [y for _, y in self.pairs("train")]
        for split in ("valid", "test"):
            pairs = self.pairs(split)
            scores = classification_report(model, self.tgt_tok, pairs, train_labels, cfg.max_sentence_len)
            report.update({f"{split}_{k}": v for k, v in scores.items()})
            self.log(N_("{split}: accuracy {accuracy:.4f} (majority class {majority_class!r}: "
                        "{majority_accuracy:.4f})"), split=split, accuracy=scores['accuracy'],
                     majority_class=scores['majority_class'], majority_accuracy=scores['majority_accuracy'])
        return report

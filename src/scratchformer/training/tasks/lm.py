"""Language modelling (GPT-like): text -> <s> ids </s> -> decoder-only model, next-token loss."""

from __future__ import annotations

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.data.batching import collate_lm
from scratchformer.data.tokenizers import PAD_ID
from scratchformer.runs.names import CONFIG
from scratchformer.training.loss import LossOutput, label_smoothed_loss
from scratchformer.training.tasks.base import Task


class LanguageModelTask(Task):
    name, arch = "lm", "decoder"

    def setup(self, resume: bool) -> ModelConfig:
        cfg = self.cfg
        train = self.texts("train")
        if cfg.init and not (resume and (self.run_dir / CONFIG).exists()):
            config = self.init_config()  # fine-tuning: the init run's tokenizer and model
        else:
            self.src_tok, self.tgt_tok = self.train_tokenizers(resume, [], train, separate=False)
            config = self.check_arch(self.preset_config(resume, tgt_vocab_size=self.tgt_tok.vocab_size))
        self.load_examples(train)
        return config

    def examples(self, split: str, loaded: list | None = None) -> list:
        return self.sentence_examples(split, loaded)

    def after_build(self, model: torch.nn.Module) -> None:
        if self.cfg.init:
            self.load_init_weights(model)

    def collate(self, examples: list) -> dict[str, Tensor]:
        return collate_lm(examples, PAD_ID)

    def loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> LossOutput:
        logits = model(batch["input_ids"])  # (B, L, V)
        return label_smoothed_loss(logits, batch["labels"], self.cfg.label_smoothing, PAD_ID)

"""Masked-LM pre-training (BERT): text of `cfg.corpus` (side `cfg.text_side`) -> [<s>, tokens, </s>] -> 15% of
the tokens selected, 80/10/10 (data/masking.py) -> EncoderForMLM; the loss (label smoothing
`cfg.label_smoothing`, as the other tasks) covers the selected positions only."""

from __future__ import annotations

import contextlib
from collections.abc import Iterator
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.data.masking import collate_mlm
from scratchformer.data.tokenizers import PAD_ID
from scratchformer.errors import N_, ConfigError
from scratchformer.evaluation.encoder import mlm_scores
from scratchformer.training.loss import LossOutput, label_smoothed_loss
from scratchformer.training.tasks.encoder import EncoderTask


def mlm_logits_and_loss(model: torch.nn.Module, batch: dict[str, Tensor],
                        eps: float = 0.0) -> tuple[Tensor, Tensor, LossOutput]:
    """A `collate_mlm` batch -> (logits (n, V), targets (n,), loss) over the n selected positions only."""
    select = batch["labels"] != PAD_ID  # (B, L) the selected positions, the only ones scored
    logits = model(batch["input_ids"], select=select)  # (n, V)
    target = batch["labels"][select]  # (n,)
    return logits, target, label_smoothed_loss(logits, target, eps, PAD_ID)


class MaskedLMTask(EncoderTask):
    name, head = "mlm", "mlm"
    mask_generator: torch.Generator | None = None  # None: masks from torch's global RNG (checkpointed)

    def setup(self, resume: bool) -> ModelConfig:
        cfg = self.cfg
        if cfg.init:
            raise ConfigError(N_("init= starts a classifier from an encoder run (--task classify); to continue an "
                                 "mlm run, train it again with --resume and a larger --max-steps"))
        texts = self.texts("train")
        config = self.encoder_setup(resume, texts, [])
        self.mask_id, self.vocab_size = config.mask_id, config.tgt_vocab_size
        self.load_examples(texts, sentences=True)
        return config

    def examples(self, split: str, loaded: list | None = None) -> list:
        return self.sentence_examples(split, loaded)

    def collate(self, examples: list) -> dict[str, Tensor]:
        return collate_mlm(examples, self.mask_id, self.vocab_size, self.mask_generator)

    def logits_and_loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, LossOutput]:
        return mlm_logits_and_loss(model, batch, self.cfg.label_smoothing)

    @contextlib.contextmanager
    def validating(self) -> Iterator[None]:
        self.mask_generator = torch.Generator().manual_seed(self.cfg.seed)  # the same masks at every evaluation
        try:
            yield
        finally:
            self.mask_generator = None

    def final_report(self, model: torch.nn.Module) -> dict[str, Any]:
        report: dict[str, Any] = {}
        for split in ("valid", "test"):
            seqs = self.examples(split)
            scores = mlm_scores(model, seqs, self.mask_id, seed=self.cfg.seed) if seqs else {}
            report.update({f"{split}_{k}": v for k, v in scores.items()})
            if scores:
                self.log(N_("{split}: masked-token accuracy {masked_accuracy:.4f}, MLM perplexity {mlm_ppl}"),
                         split=split, masked_accuracy=scores['masked_accuracy'], mlm_ppl=scores['mlm_ppl'])
        return report

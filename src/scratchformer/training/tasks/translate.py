"""Translation (the paper's task): source/target pairs -> encoder-decoder, teacher forcing, label smoothing;
greedy BLEU on a few validation sentences at each evaluation."""

from __future__ import annotations

from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.config.train import upsample_factors
from scratchformer.data.batching import collate_pairs, encode_pairs
from scratchformer.data.corpus import upsample_sources
from scratchformer.data.tokenizers import PAD_ID
from scratchformer.engines import Translator
from scratchformer.evaluation.metrics import bleu
from scratchformer.runs.names import CONFIG
from scratchformer.training.loss import LossOutput, label_smoothed_loss
from scratchformer.training.tasks.base import Task


class TranslationTask(Task):
    name, arch = "translate", "encoder-decoder"

    def setup(self, resume: bool) -> ModelConfig:
        cfg = self.cfg
        train = self.pairs("train")  # read once: tokenizers and examples
        if cfg.upsample:
            train = upsample_sources(train, cfg.corpus, upsample_factors(cfg.upsample))
        if cfg.init and not (resume and (self.run_dir / CONFIG).exists()):
            config = self.init_config()  # fine-tuning: the init run's tokenizers and model
        else:
            self.src_tok, self.tgt_tok = self.train_tokenizers(resume, [s for s, _ in train], [t for _, t in train],
                                                               separate=not cfg.shared_vocab)
            config = self.check_arch(self.preset_config(resume, src_vocab_size=self.src_tok.vocab_size,
                                                        tgt_vocab_size=self.tgt_tok.vocab_size))
        self.load_examples(train)
        return config

    def examples(self, split: str, loaded: list | None = None) -> list:
        pairs = loaded if loaded is not None else self.pairs(split)
        return encode_pairs(pairs, self.src_tok, self.tgt_tok, self.cfg.max_sentence_len)

    def lengths(self, examples: list) -> list:
        return [(len(s), len(t)) for s, t in examples]

    def after_build(self, model: torch.nn.Module) -> None:
        if self.cfg.init:
            self.load_init_weights(model)

    def collate(self, examples: list) -> dict[str, Tensor]:
        return collate_pairs(examples, PAD_ID)

    def batch_shape(self, batch: dict[str, Tensor]) -> tuple[int, int, int]:
        return (*batch["src"].shape, batch["tgt_in"].shape[1])

    def loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> LossOutput:
        logits = model(batch["src"], batch["tgt_in"])  # (B, L_tgt, V), teacher forcing
        return label_smoothed_loss(logits, batch["tgt_out"], self.cfg.label_smoothing, PAD_ID)

    def valid_metrics(self, model: torch.nn.Module, sums: dict[str, float], n: float) -> dict[str, Any]:
        """Greedy BLEU on the first `bleu_samples` validation pairs, and three samples to print."""
        if self.cfg.bleu_samples <= 0:
            return {}
        pairs = self.pairs("valid", on_error="skip")[: self.cfg.bleu_samples]
        sources = [s for s, _ in pairs]
        hyps = Translator.from_model(model, self.src_tok, self.tgt_tok).translate(sources, beam=1)
        score = bleu(hyps, [t for _, t in pairs])
        return {"bleu": round(score["score"], 2), "samples": list(zip(sources[:3], hyps[:3]))}

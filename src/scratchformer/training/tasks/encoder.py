"""What the encoder (BERT-like) tasks share: a tokenizer trained (or copied from --init) with "<mask>" as its
last id, a model config that records its head, accuracy at validation, and a report on valid and test after
training (evaluation/encoder.py). The jobs themselves: mlm.py, classify.py.

The head is recorded in config.json (`head`, and `mask_id` or `n_classes` / `labels`), so `load_run` rebuilds
the full model. "tokens" in the logs count what the loss counts: selected tokens (mlm) or sentences (classify).
"""

from __future__ import annotations

from pathlib import Path
from typing import Any

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.data.masking import add_mask_token
from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.errors import N_, CheckpointError, ConfigError
from scratchformer.model.heads import with_head
from scratchformer.runs import check_tensor, load_config, load_tokenizers, save_tokenizers, weights_path
from scratchformer.runs.names import CONFIG, TOKENIZER_TGT
from scratchformer.runs.weights import read_tensors
from scratchformer.training import distributed as dist_utils
from scratchformer.training.loss import LossOutput
from scratchformer.training.tasks.base import Task


class EncoderTask(Task):
    """The shared part of mlm and classify; subclasses set `head` and the data."""

    arch = "encoder"
    head: str
    # every rank scores every validation batch: the masked LM draws its masks from one generator in batch order
    shard_validation = False
    reports = True

    def encoder_setup(self, resume: bool, texts: list[str], labels: list[str]) -> ModelConfig:
        """Tokenizer and ModelConfig (with its head) of the run: reused on --resume, else made."""
        run = self.run_dir
        if self.resume_ready(resume):
            config = ModelConfig.load(run / CONFIG)
        else:
            config = self.new_config(texts, labels)
        self.src_tok, self.tgt_tok = load_tokenizers(run)
        return config

    def resume_ready(self, resume: bool) -> bool:
        run = self.run_dir
        return resume and (run / CONFIG).exists() and (run / TOKENIZER_TGT).exists()

    def new_config(self, texts: list[str], labels: list[str]) -> ModelConfig:
        """Train (or copy from --init) the tokenizer into the run; the ModelConfig with its head."""
        cfg, run = self.cfg, self.run_dir
        if cfg.init:
            init = Path(cfg.init)
            base = load_config(init)
            if base.arch != "encoder":
                raise ConfigError(N_("init={init} holds a {arch} model; it must be an encoder (an mlm run)"),
                                  init=init, arch=base.arch)
            base = base.replace(**cfg.model, head=None, n_classes=None, labels=None,
                                extra={**base.extra, "init": str(init)})
            self.copy_tokenizers(init)  # an encoder run has one tokenizer: tokenizer_tgt.json
        else:
            if self.dist.is_main:
                tok = train_tokenizer(cfg.tgt_tokenizer, texts, cfg.tgt_vocab_size, cfg.min_freq)
                add_mask_token(tok)  # the encoder tasks' vocabulary: the tokenizer's, then <mask>
                save_tokenizers(run, tok)
            dist_utils.barrier(self.dist)
            tok = load_tokenizers(run)[1]
            base = self.preset_config(False, tgt_vocab_size=tok.vocab_size).replace(mask_id=tok.token_to_id("<mask>"))
        if base.arch != "encoder":
            raise ConfigError(N_("task {task!r} needs an encoder model but preset {preset!r} is {arch!r}; pick "
                                 "--preset bert-tiny"), task=cfg.task, preset=cfg.preset, arch=base.arch)
        if self.head == "mlm":
            return with_head(base, "mlm")
        return with_head(base, "classification", n_classes=len(labels), labels=labels)

    def valid_step(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> tuple[LossOutput, dict[str, float]]:
        logits, target, out = self.logits_and_loss(model, batch)
        return out, {"correct": int((logits.argmax(-1) == target).sum())}

    def loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> LossOutput:
        return self.logits_and_loss(model, batch)[2]

    def logits_and_loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, LossOutput]:
        raise NotImplementedError

    def valid_metrics(self, model: torch.nn.Module, sums: dict[str, float], n: float) -> dict[str, Any]:
        return {"valid_acc": sums.get("correct", 0.0) / max(n, 1)}

    def describe(self, result: dict[str, Any]) -> list[str]:
        what = "masked-token accuracy" if self.head == "mlm" else "accuracy"
        return [f"    valid {what} {result['valid_acc']:.4f}"]


def load_encoder_weights(base: torch.nn.Module, run_dir: Path) -> Path:
    """Copy the encoder weights of `run_dir` (an mlm/classify run: tensors `base.*`; or a bare encoder run)
    into `base` (an EncoderOnly); returns the file read."""
    try:
        path = weights_path(run_dir)
    except CheckpointError:
        raise CheckpointError(N_("init={run_dir}: no model.safetensors and no checkpoint"), run_dir=run_dir) from None
    tensors = read_tensors(path)
    if any(k.startswith("base.") for k in tensors):
        tensors = {k[len("base."):]: v for k, v in tensors.items() if k.startswith("base.")}
    own = base.state_dict()
    missing, unexpected = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    bad = [k for k in own if k in tensors and tensors[k].shape != own[k].shape]
    if missing or unexpected or bad:
        raise CheckpointError(N_("{path} is not an encoder of this config (missing {missing}, unexpected "
                                 "{unexpected}, other shapes {bad}): model overrides given with init= must keep "
                                 "the init run's sizes"), path=path, missing=missing[:2], unexpected=unexpected[:2],
                              bad=bad[:2])
    for name, t in tensors.items():  # a diverged (nan) or foreign encoder would poison the classifier
        check_tensor(path, name, t, own[name])
    base.load_state_dict(tensors)
    return path

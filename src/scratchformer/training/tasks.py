"""Encoder (BERT-like) tasks on the Trainer: masked-LM pre-training and sentence classification.

    train_encoder_task(cfg, run_dir) -> summary        # `scratchformer train --task mlm | classify`

mlm       text of `cfg.corpus` (side `cfg.text_side`) -> tokenizer + "<mask>" as its last id (data/masking.py)
          -> [<s>, tokens, </s>] -> 15% of the tokens selected, 80/10/10 -> EncoderForMLM; the loss (label
          smoothing `cfg.label_smoothing`, as the other tasks) covers the selected positions only.
classify  `text<TAB>label` lines of `cfg.corpus` (splits train / valid / test) -> EncoderForClassification
          (the <s> token's vector -> pooler -> K classes); plain cross-entropy per sentence (label smoothing is
          not applied). `cfg.init` = a run directory (an mlm run, or any encoder run) whose tokenizer and
          encoder weights start the training; without it the tokenizer is trained on the labelled train split.

Everything else is the Trainer's: token-bucketed batches, Noam schedule, clipping, checkpoints and resume,
metrics.jsonl, the best weights on validation loss in model.safetensors. The head is recorded in
config.json (its fields head, mask_id / n_classes and labels), so `load_run` rebuilds the full model.
Afterwards the best weights are scored on valid and test (evaluation/encoder.py): accuracy next to the
majority-class baseline, or masked-token accuracy and perplexity. "tokens" in the logs count what the loss
counts: selected tokens (mlm) or sentences (classify).
"""

from __future__ import annotations

import contextlib
import math
import shutil
from pathlib import Path
from typing import Any

import torch
from safetensors.torch import load_file
from torch import Tensor
from torch.nn import functional as F

from scratchformer.config import ModelConfig, TrainConfig
from scratchformer.data.corpus import load_pairs, load_text
from scratchformer.data.masking import add_mask_token, collate_mlm, pad_right
from scratchformer.data.tokenizers import PAD_ID, train_tokenizer
from scratchformer.errors import ConfigError
from scratchformer.evaluation.encoder import classification_report, encode_sentences, mlm_scores
from scratchformer.model.heads import with_head
from scratchformer.training import checkpoint as ckpt
from scratchformer.training import distributed as dist_utils
from scratchformer.training.loss import LossOutput, label_smoothed_loss
from scratchformer.training.trainer import DTYPES, Trainer, load_tokenizers

ENCODER_TASKS = ("mlm", "classify")


def mlm_logits_and_loss(model: torch.nn.Module, batch: dict[str, Tensor],
                        eps: float = 0.0) -> tuple[Tensor, Tensor, LossOutput]:
    """A `collate_mlm` batch -> (logits (n, V), targets (n,), loss) over the n selected positions only."""
    select = batch["labels"] != PAD_ID  # (B, L) the selected positions, the only ones scored
    logits = model(batch["input_ids"], select=select)  # (n, V)
    target = batch["labels"][select]  # (n,)
    return logits, target, label_smoothed_loss(logits, target, eps, PAD_ID)


def classification_loss(logits: Tensor, labels: Tensor) -> LossOutput:
    """logits (B, K), labels (B,) class indices -> cross-entropy, as a LossOutput counting sentences."""
    nll = F.cross_entropy(logits.float(), labels, reduction="none")  # (B,)
    return LossOutput(nll.mean(), nll.sum(), nll.detach().sum(), labels.numel())


def load_encoder_weights(base: torch.nn.Module, run_dir: Path) -> Path:
    """Copy the encoder weights of `run_dir` (an mlm/classify run: tensors `base.*`; or a bare encoder run)
    into `base` (an EncoderOnly); returns the file read."""
    path = run_dir / "model.safetensors"
    if not path.exists():
        latest = ckpt.latest_checkpoint(run_dir)
        if latest is None:
            raise ckpt.CheckpointError(f"--init {run_dir}: no model.safetensors and no checkpoint")
        path = latest / "model.safetensors"
    tensors = load_file(str(path))
    if any(k.startswith("base.") for k in tensors):
        tensors = {k[len("base."):]: v for k, v in tensors.items() if k.startswith("base.")}
    own = base.state_dict()
    missing, unexpected = sorted(set(own) - set(tensors)), sorted(set(tensors) - set(own))
    bad = [k for k in own if k in tensors and tensors[k].shape != own[k].shape]
    if missing or unexpected or bad:
        raise ckpt.CheckpointError(f"{path} is not an encoder of this config (missing {missing[:2]}, unexpected "
                                   f"{unexpected[:2]}, other shapes {bad[:2]}): model overrides given with --init "
                                   "must keep the init run's sizes")
    for name, t in tensors.items():  # a diverged (nan) or foreign encoder would poison the classifier
        ckpt.check_tensor(path, name, t, own[name])
    base.load_state_dict(tensors)
    return path


class EncoderTaskTrainer(Trainer):
    """The Trainer with the encoder tasks' data, model and loss; see the module docstring."""

    mask_generator: torch.Generator | None = None  # None: masks from torch's global RNG (checkpointed)

    # -- data and model -------------------------------------------------------------------------------------
    def _data_and_config(self) -> None:
        cfg, run = self.cfg, self.run_dir
        if cfg.task not in ENCODER_TASKS:
            raise ConfigError(f"task {cfg.task!r} is not an encoder task ({', '.join(ENCODER_TASKS)})")
        if cfg.task == "mlm" and cfg.init:
            raise ConfigError("--init starts a classifier from an encoder run (--task classify); to continue an "
                              "mlm run, train it again with --resume and a larger --max-steps")
        if cfg.task == "mlm":
            train = texts = load_text(cfg.corpus, "train", side=cfg.text_side, on_error=cfg.on_error)
            labels = []
        else:
            train = pairs = load_pairs(cfg.corpus, "train", on_error=cfg.on_error)
            texts, labels = [t for t, _ in pairs], sorted({y for _, y in pairs})
            if len(labels) < 2:
                raise ConfigError(f"{cfg.corpus}: the train split has {len(labels)} label(s); "
                                  "classification needs `text<TAB>label` lines with 2 or more labels")
        resuming = self.resume and (run / "config.json").exists() and (run / "tokenizer_tgt.json").exists()
        if resuming:
            self.model_config = ModelConfig.load(run / "config.json")
            self.src_tok, self.tgt_tok = load_tokenizers(run)
        else:
            self.model_config = self._new_config(texts, labels)
            self.src_tok, self.tgt_tok = load_tokenizers(run)
        self.mask_id = self.model_config.mask_id
        self.labels = list(self.model_config.labels or [])
        self.train_examples = self._examples("train", train)  # read once: for the tokenizer and the examples
        self.valid_examples = self._examples("valid")
        if not self.train_examples:
            raise ConfigError(f"corpus {cfg.corpus!r} has no training sentences")

    def _new_config(self, texts: list[str], labels: list[str]) -> ModelConfig:
        """Train (or copy from --init) the tokenizer into the run; the ModelConfig with its head."""
        cfg, run = self.cfg, self.run_dir
        if cfg.init:
            init = Path(cfg.init)
            base = ckpt.load_config(init)
            if base.arch != "encoder":
                raise ConfigError(f"--init {init} holds a {base.arch} model; it must be an encoder (an mlm run)")
            base = base.replace(**cfg.model, head=None, n_classes=None, labels=None)
            if self.dist.is_main:
                shutil.copyfile(init / "tokenizer_tgt.json", run / "tokenizer_tgt.json")
            dist_utils.barrier(self.dist)
            base.extra["init"] = str(init)
        else:
            if self.dist.is_main:
                tok = train_tokenizer(cfg.tgt_tokenizer, texts, cfg.tgt_vocab_size, cfg.min_freq)
                add_mask_token(tok)  # the encoder tasks' vocabulary: the tokenizer's, then <mask>
                tok.save(run / "tokenizer_tgt.json")
            dist_utils.barrier(self.dist)
            tok = load_tokenizers(run)[1]
            overrides = dict(cfg.model)
            overrides.setdefault("max_len", max(cfg.max_len, ModelConfig.preset(cfg.preset).max_len))
            overrides["tgt_vocab_size"] = tok.vocab_size
            base = ModelConfig.preset(cfg.preset, **overrides)
            base = base.replace(mask_id=tok.token_to_id("<mask>"))
        if base.arch != "encoder":
            raise ConfigError(f"task {cfg.task!r} needs an encoder model but preset {cfg.preset!r} is "
                              f"{base.arch!r}; pick --preset bert-tiny")
        if cfg.task == "mlm":
            return with_head(base, "mlm")
        return with_head(base, "classification", n_classes=len(labels), labels=labels)

    def _examples(self, split: str, loaded: list | None = None) -> list:
        cfg = self.cfg
        if cfg.task == "mlm":
            texts = loaded if loaded is not None else load_text(cfg.corpus, split, side=cfg.text_side,
                                                                on_error=cfg.on_error)
            return [s for s in encode_sentences(self.tgt_tok, texts, cfg.max_len) if len(s) > 2]
        pairs = loaded if loaded is not None else load_pairs(cfg.corpus, split, on_error=cfg.on_error)
        unknown = sorted({y for _, y in pairs} - set(self.labels))
        if unknown:
            raise ConfigError(f"{cfg.corpus} ({split}): labels {unknown[:3]} do not occur in the train split")
        seqs = encode_sentences(self.tgt_tok, [t for t, _ in pairs], cfg.max_len)
        return [(s, self.labels.index(y)) for s, (_, y) in zip(seqs, pairs)]

    def prepare(self) -> None:
        super().prepare()
        if self.cfg.task == "classify" and self.cfg.init and self.step == 0:  # not when resuming a checkpoint
            path = load_encoder_weights(self.model.base, Path(self.cfg.init))
            self.log(f"encoder weights from {path}")

    # -- batches and loss -----------------------------------------------------------------------------------
    def _lengths(self, examples: list) -> list:
        return [len(s) for s in examples] if self.cfg.task == "mlm" else [len(s) for s, _ in examples]

    def _collate(self, examples: list) -> dict[str, Tensor]:
        if self.cfg.task == "mlm":
            batch = collate_mlm(examples, self.mask_id, self.model_config.tgt_vocab_size, self.mask_generator)
        else:
            batch = {"input_ids": pad_right([s for s, _ in examples]),
                     "labels": torch.tensor([y for _, y in examples]), "n_tokens": torch.tensor(len(examples))}
        return {k: v.to(self.device) for k, v in batch.items()}

    def _logits_and_loss(self, batch: dict[str, Tensor]) -> tuple[Tensor, Tensor, LossOutput]:
        dtype = DTYPES[self.dtype]
        autocast = torch.autocast(self.device.type, dtype=dtype) if dtype else contextlib.nullcontext()
        with autocast:
            if self.cfg.task == "mlm":
                return mlm_logits_and_loss(self.train_model, batch, self.cfg.label_smoothing)
            logits = self.train_model(batch["input_ids"])  # (B, K)
            return logits, batch["labels"], classification_loss(logits, batch["labels"])

    def _forward_loss(self, batch: dict[str, Tensor]) -> LossOutput:
        return self._logits_and_loss(batch)[2]

    # -- evaluation -----------------------------------------------------------------------------------------
    @torch.no_grad()
    def validate(self) -> dict[str, Any]:
        from scratchformer.data.batching import token_batches

        self.model.eval()
        model, self.train_model = self.train_model, self.model  # unwrapped: no DDP hooks in eval
        self.mask_generator = torch.Generator().manual_seed(self.cfg.seed)  # the same masks at every evaluation
        loss_sum = nll_sum = n = correct = 0.0
        try:
            lengths = self._lengths(self.valid_examples)
            for idx in token_batches(lengths, self.cfg.max_tokens, shuffle=False, seed=0) if lengths else []:
                logits, target, out = self._logits_and_loss(self._collate([self.valid_examples[i] for i in idx]))
                loss_sum, nll_sum, n = loss_sum + float(out.loss_sum), nll_sum + float(out.nll_sum), n + out.n_tokens
                correct += int((logits.argmax(-1) == target).sum())
        finally:
            self.train_model, self.mask_generator = model, None
            self.model.train()
        nll = nll_sum / max(n, 1)
        return {"valid_loss": loss_sum / max(n, 1), "valid_nll": nll, "valid_ppl": math.exp(min(nll, 50)),
                "valid_acc": correct / max(n, 1)}

    def _evaluate_and_keep_best(self) -> dict[str, Any]:
        result = super()._evaluate_and_keep_best()
        what = "masked-token accuracy" if self.cfg.task == "mlm" else "accuracy"
        self.log(f"    valid {what} {result['valid_acc']:.4f}")
        return result

    def final_report(self) -> dict[str, Any]:
        """The best weights (model.safetensors) on valid and test; recorded in metrics.jsonl as kind "final"."""
        ckpt.load_weights(self.model, self.run_dir / "model.safetensors")
        cfg, report = self.cfg, {}
        for split in ("valid", "test"):
            if cfg.task == "mlm":
                seqs = self._examples(split)
                scores = mlm_scores(self.model, seqs, self.mask_id, seed=cfg.seed) if seqs else {}
            else:
                pairs = load_pairs(cfg.corpus, split, on_error=cfg.on_error)
                train_labels = [y for _, y in load_pairs(cfg.corpus, "train", on_error=cfg.on_error)]
                scores = classification_report(self.model, self.tgt_tok, pairs, train_labels, cfg.max_len)
            report.update({f"{split}_{k}": v for k, v in scores.items()})
        self._record({"kind": "final", "step": self.step, **report})
        return report


def train_encoder_task(cfg: TrainConfig, out_dir: str | Path, resume: bool = False,
                       quiet: bool = False) -> dict[str, Any]:
    """Train an mlm or classify run into `out_dir` (see the module docstring); returns the summary."""
    trainer = EncoderTaskTrainer(cfg, out_dir, resume, quiet)
    try:
        summary = trainer.train()
        if trainer.dist.is_main:
            report = trainer.final_report()
            summary.update(report)
            for split in ("valid", "test"):
                if cfg.task == "classify":
                    trainer.log(f"{split}: accuracy {report[f'{split}_accuracy']:.4f} (majority class "
                                f"{report[f'{split}_majority_class']!r}: {report[f'{split}_majority_accuracy']:.4f})")
                elif f"{split}_masked_accuracy" in report:
                    trainer.log(f"{split}: masked-token accuracy {report[f'{split}_masked_accuracy']:.4f}, "
                                f"MLM perplexity {report[f'{split}_mlm_ppl']}")
        return summary
    finally:
        dist_utils.cleanup(trainer.dist)

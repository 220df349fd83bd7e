"""A Task is one job the trainer can learn (fairseq's Task, torchtune's recipe): its data, the model it needs
and its loss. The training loop (training/trainer.py) knows none of them; a new job is a new file here.

    task.setup(resume)         tokenizers (trained into the run, or reused on --resume), train/valid examples,
                               -> the ModelConfig to build
    task.examples(split)       the encoded examples of a split
    task.lengths(examples)     what token-bucketed batching sorts by
    task.collate(examples)     a batch of CPU tensors, with "n_tokens": what the loss divides by
    task.loss(model, batch)    LossOutput (under the trainer's autocast)
    task.valid_step(...)       the loss and extra sums of one validation batch (accuracy counts)
    task.valid_metrics(...)    validation figures beyond the loss (BLEU, accuracy), logged and recorded
    task.final_report(model)   figures on valid and test after training (the encoder tasks), or None
"""

from __future__ import annotations

import contextlib
import sys
from collections.abc import Callable, Iterator
from pathlib import Path
from typing import Any, ClassVar

import torch
from torch import Tensor

from scratchformer.config import ModelConfig
from scratchformer.data.batching import encode_sentences
from scratchformer.data.corpus import HOLDOUT_LEAST, HOLDOUT_SHARE, is_bundled, load_pairs, load_text
from scratchformer.data.tokenizers import Tokenizer, train_tokenizer
from scratchformer.errors import ConfigError
from scratchformer.i18n import N_, _, say
from scratchformer.runs import (
    copy_tokenizers,
    load_config,
    load_tokenizers,
    load_weights,
    save_tokenizers,
    weights_path,
)
from scratchformer.runs.names import CONFIG, TOKENIZER_TGT
from scratchformer.training import distributed as dist_utils
from scratchformer.training.distributed import DistInfo
from scratchformer.training.loss import LossOutput

FINE_TUNE_OVERRIDES = ("dropout", "attention_dropout", "activation_dropout")  # what --init may change
PRESET_FOR_ARCH = {"encoder-decoder": "demo", "decoder": "gpt-tiny", "encoder": "bert-tiny"}  # named in errors


# where a run's valid and test sentences come from (the summary's "splits", English in --json), as note_splits says
SPLITS = {"own": N_("the corpus's own"), "none": N_("one file serves train, valid and test"),
          "small": N_("too small to hold out: one file serves all"), "hash": N_("held out by hash ({share:.0%} each)")}


def splits_shown(text: str) -> str:
    """A summary's "splits" in the language of `_()`."""
    for template in SPLITS.values():
        if text == template.format(share=HOLDOUT_SHARE):
            return _(template).format(share=HOLDOUT_SHARE)
    return text

class Task:
    """The part of training that depends on the job; see the module docstring."""

    name: ClassVar[str]
    arch: ClassVar[str]  # the architecture the task trains
    shard_validation: ClassVar[bool] = True  # under DDP each rank may score 1/world of the validation batches
    reports: ClassVar[bool] = False  # has a final_report (figures on valid and test after training)

    def __init__(self, cfg: Any, run_dir: Path, dist: DistInfo, log: Callable[[str], None]) -> None:
        self.cfg, self.run_dir, self.dist, self.log = cfg, Path(run_dir), dist, log
        self.src_tok: Tokenizer
        self.tgt_tok: Tokenizer
        self.train_examples: list = []
        self.valid_examples: list = []
        self.split_info: dict[str, Any] = {}  # where train / valid / test came from (`note_splits`), for the summary

    # -- data and model -------------------------------------------------------------------------------------
    def setup(self, resume: bool) -> ModelConfig:
        raise NotImplementedError

    def examples(self, split: str, loaded: list | None = None) -> list:
        raise NotImplementedError

    def lengths(self, examples: list) -> list:
        return [len(s) for s in examples]

    def collate(self, examples: list) -> dict[str, Tensor]:
        raise NotImplementedError

    def batch_shape(self, batch: dict[str, Tensor]) -> tuple[int, int, int]:
        """(B, L_src, L_tgt) of a collated batch, for the model-FLOP count (one sequence: L_tgt = 0)."""
        b, length = batch["input_ids"].shape
        return b, length, 0

    def after_build(self, model: torch.nn.Module) -> None:
        """Called once on a fresh run (step 0) after the model is built: e.g. start from another run's weights."""

    # -- loss and validation --------------------------------------------------------------------------------
    def loss(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> LossOutput:
        raise NotImplementedError

    def valid_step(self, model: torch.nn.Module, batch: dict[str, Tensor]) -> tuple[LossOutput, dict[str, float]]:
        return self.loss(model, batch), {}

    @contextlib.contextmanager
    def validating(self) -> Iterator[None]:
        """Held around a whole validation pass (the masked LM fixes its masks here)."""
        yield

    def valid_metrics(self, model: torch.nn.Module, sums: dict[str, float], n: float) -> dict[str, Any]:
        return {}

    def describe(self, result: dict[str, Any]) -> list[str]:
        """Lines to log after a validation's loss line."""
        return []

    def final_report(self, model: torch.nn.Module) -> dict[str, Any] | None:
        return None

    # -- shared helpers -------------------------------------------------------------------------------------
    def pairs(self, split: str, on_error: str | None = None) -> list[tuple[str, str]]:
        """`split` of the run's corpus as pairs, a one-file corpus split by the run's --holdout rule."""
        cfg = self.cfg
        return load_pairs(cfg.corpus, split, on_error=on_error or cfg.on_error, holdout=cfg.holdout)

    def texts(self, split: str) -> list[str]:
        """`split` of the run's corpus as sentences (side --text-side), split like `pairs`."""
        cfg = self.cfg
        return load_text(cfg.corpus, split, side=cfg.text_side, on_error=cfg.on_error, holdout=cfg.holdout)

    def note_splits(self, train: list, valid: list) -> None:
        """Say (log and summary) where valid and test come from when the corpus is one file of the user's."""
        cfg = self.cfg
        if is_bundled(cfg.corpus):
            self.split_info = {"corpus": cfg.corpus, "splits": SPLITS["own"]}
            return
        if cfg.holdout == "none":
            self.split_info = {"corpus": cfg.corpus, "splits": SPLITS["none"]}
            self.warn(N_("holdout=none: {corpus} serves train, valid and test alike; the valid and test scores "
                         "are training scores"), corpus=cfg.corpus)
            return
        n_train, n_valid = len(train), len(valid)
        n_test = len(self.texts("test") if cfg.task in ("lm", "mlm") else self.pairs("test"))
        if n_train == n_valid == n_test:  # held_out leaves a file of < HOLDOUT_LEAST sentences whole
            self.split_info = {"corpus": cfg.corpus, "splits": SPLITS["small"]}
            self.warn(N_("{corpus}: too few distinct sentences to hold out valid and test (fewer than "
                         "{HOLDOUT_LEAST}): it serves train, valid and test alike, so the valid and test scores are "
                         "training scores"), corpus=cfg.corpus, HOLDOUT_LEAST=HOLDOUT_LEAST)
            return
        self.split_info = {"corpus": cfg.corpus, "splits": SPLITS["hash"].format(share=HOLDOUT_SHARE),
                           "train": n_train, "valid": n_valid, "test": n_test}
        self.log(N_("{corpus}: one file, split by a hash of each source sentence (holdout=hash): {n_train} train, "
                    "{n_valid} valid, {n_test} test rows; valid and test are never trained on"), corpus=cfg.corpus,
                 n_train=n_train, n_valid=n_valid, n_test=n_test)

    def warn(self, msg: str, **fields: Any) -> None:
        if self.dist.is_main:
            print(_("warning: {message}").format(message=say(msg, **fields)), file=sys.stderr, flush=True)

    def train_tokenizers(self, resume: bool, src_texts: list[str], tgt_texts: list[str],
                         separate: bool) -> tuple[Tokenizer, Tokenizer]:
        """The run's tokenizers: reused on --resume, else trained on rank 0 (source and target apart when
        `separate`, else one on both sides) while the other ranks wait."""
        cfg, run = self.cfg, self.run_dir
        reuse = (run / TOKENIZER_TGT).exists() and resume
        dist_utils.barrier(self.dist)  # every rank decides before rank 0 may write: all skip the barrier below or none
        if reuse:
            return load_tokenizers(run)
        if self.dist.is_main:
            if separate:
                save_tokenizers(run, train_tokenizer(cfg.tgt_tokenizer, tgt_texts, cfg.tgt_vocab_size, cfg.min_freq),
                                train_tokenizer(cfg.src_tokenizer, src_texts, cfg.src_vocab_size, cfg.min_freq))
            else:
                save_tokenizers(run, train_tokenizer(cfg.tgt_tokenizer, src_texts + tgt_texts, cfg.tgt_vocab_size,
                                                     cfg.min_freq))
        dist_utils.barrier(self.dist)
        return load_tokenizers(run)

    def init_config(self) -> ModelConfig:
        """--init RUN (fine-tuning): RUN's model config (with the model overrides given, e.g. dropout), checked before
        anything is written, then RUN's tokenizer files copied byte for byte; its weights load in `after_build`."""
        init = Path(self.cfg.init)
        config = load_config(init)
        changed = {k: v for k, v in self.cfg.model.items() if getattr(config, k, None) != v}
        sizes = sorted(k for k in changed if k not in FINE_TUNE_OVERRIDES)
        if sizes:
            raise ConfigError(N_("init={init}: model override {sizes}={changed!r} would change the model that "
                                 "{init} trained; only {FINE_TUNE_OVERRIDES} may change"), init=init, sizes=sizes[0],
                              changed=changed[sizes[0]], FINE_TUNE_OVERRIDES=', '.join(FINE_TUNE_OVERRIDES))
        config = self.check_arch(config.replace(**changed, extra={**config.extra, "init": str(init)}))
        self.copy_tokenizers(init)
        self.src_tok, self.tgt_tok = load_tokenizers(self.run_dir)
        return config

    def copy_tokenizers(self, init: Path) -> None:
        """The tokenizer files of run `init` into this run, byte for byte (rank 0 writes, the others wait)."""
        if self.dist.is_main:
            copy_tokenizers(init, self.run_dir)
        dist_utils.barrier(self.dist)

    def load_init_weights(self, model: torch.nn.Module) -> None:
        """--init RUN: RUN's weights (best on validation, or its latest checkpoint) into the freshly built model."""
        path = weights_path(Path(self.cfg.init))
        load_weights(model, path)
        self.log(N_("fine-tuning from {path}"), path=path)

    def preset_config(self, resume: bool, **sizes: int) -> ModelConfig:
        """config.json of the run on --resume, else the preset with the model overrides and the vocabulary sizes."""
        cfg, run = self.cfg, self.run_dir
        if (run / CONFIG).exists() and resume:
            return ModelConfig.load(run / CONFIG)
        overrides = dict(cfg.model)
        overrides.setdefault("max_positions", max(cfg.max_sentence_len, ModelConfig.preset(cfg.preset).max_positions))
        overrides.update(sizes)
        return ModelConfig.preset(cfg.preset, **overrides)

    def check_arch(self, config: ModelConfig) -> ModelConfig:
        if config.arch != self.arch:
            raise ConfigError(N_("task {task!r} needs an {arch} model but preset {preset!r} is {arch2!r}; pick another "
                                 "--preset (e.g. {example})") if self.arch[0] == "e" else
                              N_("task {task!r} needs a {arch} model but preset {preset!r} is {arch2!r}; pick another "
                                 "--preset (e.g. {example})"), task=self.cfg.task, arch=self.arch,
                              preset=self.cfg.preset, arch2=config.arch, example=PRESET_FOR_ARCH[self.arch])
        return config

    def load_examples(self, train: list, sentences: bool = False) -> None:
        """train_examples from the already-read train split, valid_examples read now; none to train on is an error."""
        self.train_examples = self.examples("train", train)  # read once: for the tokenizer and the examples
        valid = self.texts("valid") if self.cfg.task in ("lm", "mlm") else self.pairs("valid")
        self.valid_examples = self.examples("valid", valid)
        self.note_splits(train, valid)
        if not self.train_examples:
            raise ConfigError(N_("corpus {corpus!r} has no training sentences") if sentences else
                              N_("corpus {corpus!r} has no training examples shorter than max_sentence_len={max_len}"),
                              corpus=self.cfg.corpus, max_len=self.cfg.max_sentence_len)

    def sentence_examples(self, split: str, loaded: list | None = None) -> list[list[int]]:
        """A text corpus's sentences as <s> ids </s> (cut to max_len), empty ones dropped (the lm and mlm data)."""
        cfg = self.cfg
        texts = loaded if loaded is not None else self.texts(split)
        return [s for s in encode_sentences(self.tgt_tok, texts, cfg.max_sentence_len) if len(s) > 2]

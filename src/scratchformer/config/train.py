"""TrainConfig: how a model is trained (the model itself is a ModelConfig), saved as train_config.json; and RECIPES,
the named settings of `scratchformer train --recipe NAME`."""

from __future__ import annotations

import dataclasses
import math
import re
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratchformer.config.fields import check_field_types, read_json, reject_unknown_fields, renamed_fields
from scratchformer.config.model import ModelConfig, upgrade_fields
from scratchformer.errors import ConfigError, Message
from scratchformer.i18n import N_

TASKS = ("translate", "lm", "mlm", "classify")
MAX_UPSAMPLE = 100  # upsample=SOURCE=N: N copies of a source's pairs are held in memory
_ANY_VOCAB = 2**31 - 1  # a stand-in vocabulary size: ids are checked against the real one once it is known
DEVICE_PATTERN = re.compile(r"auto|cpu|mps|cuda(:\d+)?")


# The fields `scratchformer train` takes as flags (`--max-steps 400`; test_report is `--no-test`); every other field
# is a KEY=VALUE argument (`warmup=4000`), as the model's own fields are. Messages name a field the way it is given.
TRAIN_FLAGS = ("task", "corpus", "preset", "max_steps", "dtype", "test_report")
# Fields renamed since older train_config.json / --config files were written: old name -> new name.
RENAMED_TRAIN_FIELDS = {"max_len": "max_sentence_len"}


# What each field means: the help of train's flags and KEY=VALUE keys (`train --help`), in the catalog.
FIELD_HELP: dict[str, str] = {
    "task": N_("what to train: translate, lm (a language model), mlm (masked LM) or classify"),
    "corpus": N_("what to train on: a TSV file (source<TAB>target on each line, .tsv or .tsv.gz), "
                 "\"SRC_FILE,TGT_FILE\" (two aligned text files), or a bundled corpus (en-zh, software, gimp, "
                 "lo-module, toy)"),
    "holdout": N_("a corpus of one file: hash holds out valid and test rows by a hash of the source sentence (5%% "
                  "each, at most 2,000); none uses the file for every split (scores on it are training scores)"),
    "preset": N_("the model's sizes and architecture (a preset of `scratchformer params`)"),
    "src_tokenizer": N_("source tokenizer: char, word, bpe or unigram"),
    "tgt_tokenizer": N_("target tokenizer: char, word, bpe or unigram"),
    "src_vocab_size": N_("source vocabulary size (bpe, unigram); the model's follows"),
    "tgt_vocab_size": N_("target vocabulary size (bpe, unigram); the model's follows"),
    "shared_vocab": N_("one tokenizer for both sides"),
    "min_freq": N_("rarest token kept in a char or word vocabulary (occurrences)"),
    "max_sentence_len": N_("longest training sentence in tokens, specials included; longer pairs are dropped"),
    "max_tokens": N_("padded tokens per batch (per process)"),
    "accum_steps": N_("micro-batches per optimiser update"),
    "max_steps": N_("optimiser updates to train for"),
    "max_epochs": N_("stop after this many passes over the data (none: no limit)"),
    "time_limit": N_("minutes: training stops and saves when they are spent (none: no limit)"),
    "warmup": N_("updates of linear learning-rate warm-up (Noam schedule)"),
    "lr_factor": N_("multiplies the Noam learning rate"),
    "label_smoothing": N_("label smoothing epsilon, in [0, 1)"),
    "clip_norm": N_("gradient-norm clipping (none: no clipping)"),
    "seed": N_("random seed (initial weights, batch order, dropout)"),
    "log_every": N_("updates between log lines"),
    "eval_every": N_("updates between validations (0: only at the end)"),
    "save_every": N_("updates between checkpoints (0: only at the end)"),
    "keep_last": N_("checkpoints kept"),
    "patience": N_("stop after this many validations without a better loss (none: never)"),
    "bleu_samples": N_("validation sentences translated (greedy) for BLEU at each validation"),
    "dtype": N_("training number format: fp32, bf16, fp16 (GPU) or auto (measured)"),
    "compile": N_("torch.compile the model"),
    "device": N_("auto, cpu, cuda, cuda:N or mps"),
    "on_error": N_("malformed corpus lines: stop or skip"),
    "fsdp": N_("shard the model over the GPUs of torchrun (FSDP) instead of DDP"),
    "text_side": N_("lm / mlm on a parallel corpus: which side is the text: src, tgt or both"),
    "upsample": N_("a corpus of several sources: repeat some sources' train pairs, e.g. gimp=4,django=2"),
    "test_report": N_("the test-split report once training ends"),
    "init": N_("a run directory to start from (fine-tuning; classify: its encoder)"),
}


def train_option(name: str) -> str:
    """How a field is given on train's command line: `--max-steps` for a flag, `warmup=` for a KEY=VALUE."""
    return "--" + name.replace("_", "-") if name in TRAIN_FLAGS else f"{name}="


def as_given(name: str, value: Any) -> str:
    """A field and its value as one gives them: `--max-steps 0`, `warmup=0`."""
    flag = train_option(name)
    return f"{flag}{value}" if flag.endswith("=") else f"{flag} {value}"


def _label(name: str) -> str:
    return f"{train_option(name)} ({name})" if name in TRAIN_FLAGS else name


def upgrade_train_fields(data: Any) -> Any:
    """A mapping of TrainConfig fields with the old names of RENAMED_TRAIN_FIELDS replaced by the new ones (older
    train_config.json and --config files; their `model` overrides are upgraded by TrainConfig itself); a one-line
    ConfigError if both names are given with different values."""
    return renamed_fields(data, RENAMED_TRAIN_FIELDS)


@dataclass
class TrainConfig:
    task: str = "translate"
    corpus: str = "en-zh"  # a bundled corpus name, a TSV file, or "SRC_FILE,TGT_FILE"
    holdout: str = "hash"  # a corpus of one file: hash = valid and test held out of it (data/corpus.py held_out),
    # none = the file serves every split (valid and test scores are then training scores)
    preset: str = "demo"
    model: dict[str, Any] = field(default_factory=dict)  # ModelConfig overrides
    src_tokenizer: str = "bpe"  # char | word | bpe | unigram
    tgt_tokenizer: str = "char"  # the seeds split Chinese into characters
    src_vocab_size: int = 8000
    tgt_vocab_size: int = 4000
    shared_vocab: bool = False  # one tokenizer for both sides (then tie_embeddings shares all three matrices)
    min_freq: int = 1
    max_sentence_len: int = 128  # longest training sentence in tokens, specials included; longer pairs are dropped
    max_tokens: int = 4096  # padded tokens per batch (per rank)
    accum_steps: int = 1  # micro-batches per optimiser update
    max_steps: int = 1000  # optimiser updates
    max_epochs: int | None = None
    time_limit: float | None = None  # minutes; training stops (and saves) when it is reached
    warmup: int = 4000
    lr_factor: float = 1.0
    label_smoothing: float = 0.1
    clip_norm: float | None = 1.0
    seed: int = 1
    log_every: int = 25
    eval_every: int = 250
    save_every: int = 250
    keep_last: int = 5
    patience: int | None = None  # stop after this many evaluations without a better validation loss
    bleu_samples: int = 200  # validation sentences translated (greedy) for BLEU at each evaluation
    dtype: str = "fp32"  # fp32 | bf16 | fp16 | auto (autocast; fp16: gradient scaler, GPU; auto: measured, bf16|fp32)
    compile: bool = False
    device: str = "auto"  # auto | cpu | cuda | cuda:N
    on_error: str = "stop"  # malformed corpus lines: stop | skip
    fsdp: bool = False
    text_side: str = "both"  # lm / mlm: which side of a parallel corpus is the text: src | tgt | both
    upsample: str | None = None  # translate, a corpus of several sources: "gimp=4,django=2" repeats those sources'
    # train pairs 4 and 2 times (data/corpus.py upsample_sources)
    test_report: bool = True  # translate: greedy BLEU on the test split once training ends (`train --no-test`: off)
    init: str | None = None  # a run directory to start from: its weights, tokenizers and model config (translate,
    # lm: fine-tuning with a fresh optimiser and schedule), or its encoder (classify: e.g. an mlm run)

    def __post_init__(self) -> None:
        if isinstance(self.model, dict):  # the old names of model fields (max_len: max_positions), once, here
            self.model = upgrade_fields(self.model)
        check_field_types(type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)}, _label)
        if self.task not in TASKS:
            raise ConfigError("task={task!r} is not one of {tasks} (--task)", task=self.task, tasks=", ".join(TASKS))
        if self.dtype not in ("fp32", "bf16", "fp16", "auto"):
            raise ConfigError(N_("dtype={dtype!r} is not one of fp32, bf16, fp16, auto (--dtype)"), dtype=self.dtype)
        for name in ("max_tokens", "accum_steps", "max_steps", "warmup", "max_sentence_len"):
            if getattr(self, name) <= 0:
                raise ConfigError(N_("{name} must be positive, got {value}"), name=name,
                                  value=getattr(self, name))
        if self.holdout not in ("hash", "none"):
            raise ConfigError(N_("holdout={holdout!r} is not one of hash, none"), holdout=self.holdout)
        if self.text_side not in ("src", "tgt", "both"):
            raise ConfigError(N_("text_side={text_side!r} is not one of src, tgt, both"),
                              text_side=self.text_side)
        if not 0 <= self.label_smoothing < 1:  # also refuses nan
            raise ConfigError(N_("label_smoothing must be in [0, 1), got {label_smoothing}"),
                              label_smoothing=self.label_smoothing)
        self._check_ranges()
        self._check_model_overrides()
        if self.upsample is not None:
            upsample_factors(self.upsample)  # the syntax; the sources are checked against the corpus when it is read
            if self.task != "translate":
                raise ConfigError(N_("upsample= is for --task translate, not {task}"), task=self.task)

    def _check_ranges(self) -> None:
        """The numeric flags' ranges, one line each naming the flag."""
        def need(ok: bool, name: str, what: str) -> None:
            if not ok:
                raise ConfigError("{given}: must be {what}", given=as_given(name, getattr(self, name)),
                                  what=Message(what))

        need(self.log_every >= 1, "log_every", N_(">= 1 (log every N updates)"))
        for name in ("eval_every", "save_every"):
            need(getattr(self, name) >= 0, name, N_(">= 0 (0: only at the end)"))
        need(self.keep_last >= 1, "keep_last", N_(">= 1 (checkpoints kept)"))
        need(self.bleu_samples >= 0, "bleu_samples", N_(">= 0"))
        need(math.isfinite(self.lr_factor) and self.lr_factor > 0, "lr_factor", N_("a finite number > 0"))
        need(self.clip_norm is None or (math.isfinite(self.clip_norm) and self.clip_norm > 0), "clip_norm",
             N_("a finite number > 0, or none (no clipping)"))
        need(self.time_limit is None or (math.isfinite(self.time_limit) and self.time_limit > 0), "time_limit",
             N_("a number of minutes > 0"))
        need(self.max_epochs is None or self.max_epochs > 0, "max_epochs", N_("> 0"))
        need(self.min_freq >= 1, "min_freq", N_(">= 1"))
        need(self.patience is None or self.patience >= 1, "patience", N_(">= 1 (evaluations), or none"))
        need(self.patience is None or self.eval_every > 0, "patience", N_("used with eval_every > 0"))
        need(DEVICE_PATTERN.fullmatch(self.device) is not None, "device", N_("auto, cpu, cuda, cuda:N or mps"))

    def _check_model_overrides(self) -> None:
        """The KEY=VALUE model overrides (`model`) meet ModelConfig's own checks here, as the flags meet theirs:
        before anything is written (late, `dropout=1.5` failed only after --overwrite had cleared the run). The
        vocabulary sizes come from the tokenizers later, so the ids are checked then; with init= the overrides
        apply to that run's config, so only each value on its own is checked here."""
        if not self.model:
            return
        try:
            if self.init is not None:
                reject_unknown_fields(ModelConfig, upgrade_fields(self.model), N_("model override(s)"))
            else:
                unbounded = {"src_vocab_size": _ANY_VOCAB, "tgt_vocab_size": _ANY_VOCAB}  # the real ones come later
                ModelConfig.preset(self.preset, **{**self.model, **unbounded})
        except ConfigError as e:
            raise ConfigError(N_("model override: {e}"), e=e) from None

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> TrainConfig:
        if not isinstance(data, dict):
            raise ConfigError(N_("training options must be a JSON object of TrainConfig fields, not {name}"),
                              name=type(data).__name__)
        data = upgrade_train_fields(data)
        reject_unknown_fields(cls, data, N_("training option(s)"), _label)
        return cls(**data)

    @classmethod
    def load(cls, path: str | Path) -> TrainConfig:
        """train_config.json (or a --config file); a ConfigError naming the file for any bad value."""
        data = read_json(path, N_("training config"))  # a JSON object, or a one-line error naming the file
        if isinstance(data, dict) and "holdout" not in data:
            data["holdout"] = "none"  # a run trained before the rule: its file served every split
        try:
            return cls.from_dict(data)
        except ConfigError as e:
            raise ConfigError(N_("training config {path}: {e}"), path=path, e=e) from None


def upsample_factors(spec: str) -> dict[str, int]:
    """{source: times} of an upsample value "SOURCE=N[,SOURCE=N...]" (N an integer >= 1), or a ConfigError."""
    factors: dict[str, int] = {}
    for item in spec.split(","):
        name, _, times = item.strip().partition("=")
        if not name.strip() or not re.fullmatch(r"[0-9]+", times.strip()) or int(times) < 1 or name.strip() in factors:
            raise ConfigError(N_("upsample={spec!r}: write SOURCE=N[,SOURCE=N...], each source once, N a whole "
                                 "number >= 1 (e.g. gimp=4,django=2)"), spec=spec)
        if int(times) > MAX_UPSAMPLE:
            raise ConfigError(N_("upsample={strip}={strip2}: N must be at most {MAX_UPSAMPLE} (the source's pairs "
                                 "are held N times in memory)"), strip=name.strip(), strip2=times.strip(),
                              MAX_UPSAMPLE=MAX_UPSAMPLE)
        factors[name.strip()] = int(times)
    return factors


# Named training recipes (`scratchformer train --recipe NAME`): settings measured on a 2-core CPU.
_ENCODER_DEMO = {"norm_placement": "pre", "positions": "sinusoidal", "scale_embeddings": True, "n_encoder_layers": 2}
RECIPES: dict[str, dict[str, Any]] = {
    # a few minutes on a laptop: shows learning, not translation quality
    "demo": dict(preset="demo", max_steps=400, warmup=1000, lr_factor=1.0, max_tokens=3000, eval_every=200,
                 save_every=200, bleu_samples=100),
    # the shipped checkpoint: as long as the corpus rewards on a CPU
    "long": dict(preset="demo", max_steps=8000, warmup=1000, lr_factor=1.0, max_tokens=4096, eval_every=500,
                 save_every=250, bleu_samples=0, time_limit=75.0, model={"tie_embeddings": True}),
    # the broader software-documentation corpus (docs/corpus.md): LibreOffice help + GIMP, Debian FAQ, maint-guide,
    # Debian Edu, Django, JupyterLab; trained until validation stops improving (patience), bf16 where measured
    # faster. Model size from scripts/sweep_software.py (docs/sweep_software.jsonl, 500 updates each): d256 3+3 (the
    # demo preset, 8.0M parameters) reached valid NLL 2.83, d256 4+4 (9.9M) 3.05; d384 4+4 was stopped unmeasured.
    "software": dict(corpus="software", preset="demo", max_steps=40000, warmup=1000, lr_factor=1.0, max_tokens=4096,
                     eval_every=500, save_every=250, keep_last=5, patience=6, bleu_samples=0, dtype="auto",
                     model={"tie_embeddings": True}),
    # GPT-like language model on both sides of en-zh as plain text (gpt-tiny, byte-level BPE): 0.4-0.65 s per
    # update on 1 thread, 5-9 min (docs/lm.md)
    "lm-demo": dict(task="lm", corpus="en-zh", preset="gpt-tiny", tgt_tokenizer="bpe", tgt_vocab_size=8000,
                    max_steps=800, warmup=200, lr_factor=0.7, max_tokens=2048, label_smoothing=0.0,
                    eval_every=400, save_every=400, log_every=50, bleu_samples=0, model={"dropout": 0.0}),
    # BERT-like masked-LM pre-training on the English side of en-zh: ~5 min on 1 thread. bert-tiny made quick to
    # learn (docs/encoder.md): 2 pre-norm layers and the paper's input layer (x sqrt(D) + sinusoids); with BERT's
    # learned positions (init N(0, 0.02)) and 4 post-norm layers it stays on the unigram plateau for this budget
    "mlm-demo": dict(task="mlm", corpus="en-zh", text_side="src", preset="bert-tiny", tgt_tokenizer="bpe",
                     tgt_vocab_size=8000, max_steps=1000, warmup=200, lr_factor=1.0, max_tokens=2048,
                     label_smoothing=0.0, eval_every=500, save_every=500, log_every=50, bleu_samples=0,
                     model={**_ENCODER_DEMO, "dropout": 0.0, "attention_dropout": 0.0}),
    # a classifier on lo-module (which LibreOffice module a help sentence documents), same architecture; add
    # `init=runs/mlm-demo` to start from the pre-trained encoder (its tokenizer and weights)
    "classify-demo": dict(task="classify", corpus="lo-module", preset="bert-tiny", tgt_tokenizer="bpe",
                          tgt_vocab_size=8000, max_steps=600, warmup=100, lr_factor=0.2, max_tokens=2048,
                          label_smoothing=0.0, eval_every=100, save_every=300, log_every=50, bleu_samples=0,
                          model={**_ENCODER_DEMO, "dropout": 0.1, "attention_dropout": 0.1}),
    # the seeds' sanity check: overfit six toy pairs
    "toy": dict(corpus="toy", preset="tiny", src_tokenizer="word", tgt_tokenizer="char", max_steps=200,
                warmup=40, lr_factor=0.5, max_tokens=512, label_smoothing=0.0, eval_every=150, save_every=150,
                bleu_samples=6, log_every=10, model={"dropout": 0.0}),
}

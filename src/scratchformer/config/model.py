"""ModelConfig: every size of the architecture in one dataclass, with the paper's presets.

    config = ModelConfig.preset("paper-base")              # Table 3, base model: 65M parameters
    config = ModelConfig.preset("tiny", d_model=128)       # a preset with overrides
    config.save(path); ModelConfig.load(path)              # a run's config.json (runs/names.py)

Names follow the paper: d_model, h (`n_heads`), d_k, d_v, d_ff, N (`n_encoder_layers`, `n_decoder_layers`).
Each choice is a `Literal` type, written once: the tuples of allowed names (ARCHS, ...) are read from it, and
model/feedforward.py's ACTIVATIONS table (the one table of activations: how to build one, its names in Hugging Face
and CTranslate2) has exactly the Activation names (a test checks it).
Also here: the memory check made before a model is allocated, and the presets (Table 3 and small ones).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any, Literal, get_args

from scratchformer.config.fields import (
    check_choices,
    check_field_types,
    read_json,
    reject_unknown_fields,
    renamed_fields,
)
from scratchformer.errors import ConfigError
from scratchformer.i18n import N_

Arch = Literal["encoder-decoder", "encoder", "decoder"]
NormPlacement = Literal["post", "pre", "seed000", "seed003"]  # where the norm sits: model/norm.py has the formulas
NormKind = Literal["layer", "rms", "seed000"]  # LayerNorm (the paper) | RMSNorm (Llama) | seed 000's (model/norm.py)
Positions = Literal["sinusoidal", "sinusoidal-concat", "learned", "rope"]
Activation = Literal["relu", "gelu", "gelu-tanh", "silu"]
FfnKind = Literal["mlp", "gated"]  # the paper's two matrices | GLU (SwiGLU with silu: Llama; GeGLU with gelu)
Head = Literal["mlm", "classification"]
ARCHS, POSITIONS, ACTIVATIONS = get_args(Arch), get_args(Positions), get_args(Activation)
FFN_KINDS = get_args(FfnKind)
NORMS, NORM_KINDS = get_args(NormPlacement), get_args(NormKind)
# The task head's fields; older config.json files kept them in `extra`, from where __post_init__ moves them.
HEAD_FIELDS = ("head", "n_classes", "labels", "mask_id")
# Fields renamed since older config.json files were written: old name -> new name (upgrade_fields maps them).
RENAMED_FIELDS = {"norm": "norm_placement", "max_len": "max_positions"}


@dataclass
class ModelConfig:
    """The architecture. Defaults are the paper's base model (Table 3, first row)."""

    arch: Arch = "encoder-decoder"  # "encoder-decoder" (paper) | "encoder" (BERT-like) | "decoder" (GPT-like)
    src_vocab_size: int = 37000  # encoder vocabulary (unused by single-stack models)
    tgt_vocab_size: int = 37000  # decoder vocabulary; the one vocabulary of single-stack models
    d_model: int = 512
    n_heads: int = 8  # h
    n_kv_heads: int | None = None  # h_kv heads of keys/values (GQA: each shared by h / h_kv query heads); None -> h
    d_k: int | None = None  # per-head query/key width; None -> d_model // n_heads
    d_v: int | None = None  # per-head value width; None -> d_k (the paper keeps d_v = d_k)
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1  # P_drop: sublayer outputs and embedding + position sums
    attention_dropout: float = 0.0  # on the attention weights (nn.Transformer and BERT use P_drop here)
    activation_dropout: float = 0.0  # inside the FFN, after the activation
    # "post": Norm(x + Sublayer(x)) (paper) | "pre": x + Sublayer(Norm(x)) | "seed000" | "seed003" (model/norm.py)
    norm_placement: NormPlacement = "post"
    # "layer": LayerNorm (paper) | "rms": RMSNorm (Llama) | "seed000": seed 000's (unbiased std, eps added to the std);
    # layer_norm_eps is its eps
    norm_kind: NormKind = "layer"
    final_norm: bool | None = None  # a norm after each stack; None -> True for pre and seed000, False otherwise
    # interleaved sin/cos added at the input (paper) | "sinusoidal-concat" (sin|cos) | "learned" | "rope": q and k
    # turned inside attention (Llama; model/rope.py)
    positions: Positions = "sinusoidal"
    rope_theta: float = 10000.0  # rope: the base of its wavelengths (Llama 2: 1e4, SmolLM2: 1e5, Llama 3: 5e5)
    # rope: Hugging Face's scaling rule, {"rope_type": "linear" | "llama3", "factor": ..., ...}; None = none
    rope_scaling: dict[str, Any] | None = None
    activation: Activation = "relu"  # "relu" (paper) | "gelu" (exact erf) | "gelu-tanh" | "silu" (swish: Marian)
    ffn_kind: FfnKind = "mlp"  # "mlp": act(x W_1) W_2 (paper) | "gated": (act(x W_gate) * x W_up) W_2 (Llama)
    tie_embeddings: bool = True  # share target embedding and pre-softmax weights (and source, if same vocab)
    scale_embeddings: bool = True  # multiply token embeddings by sqrt(d_model) (paper section 3.4)
    max_positions: int = 512  # longest sequence the positions cover (the old name max_len still loads)
    pad_id: int = 0
    # First target token; None -> the tokenizer's BOS. Where it equals pad_id (Marian, T5), target position 0
    # is the start symbol and is never masked as padding.
    decoder_start_id: int | None = None
    layer_norm_eps: float = 1e-5
    bias: bool = True  # biases in attention projections and FFN
    generator_bias: bool = True  # bias of the pre-softmax linear layer
    type_vocab_size: int = 0  # BERT's token-type (segment) embeddings; 0 = none
    embedding_norm: bool = False  # LayerNorm right after the input layer (BERT)
    fused: bool = True  # use PyTorch's fused kernels (SDPA, F.layer_norm) for the same formulas
    # A task head on an encoder (model/build.py builds it): "mlm" (BERT's masked-LM) | "classification"
    head: Head | None = None
    n_classes: int | None = None  # classification: K
    labels: list[str] | None = None  # classification: the K class names, in logit order
    mask_id: int | None = None  # the <mask> token's id (the encoder tasks' vocabulary)
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes (e.g. where weights came from)

    def __post_init__(self) -> None:
        self._adopt_head_from_extra()
        self._adopt_rope_type()
        self.validate()

    def _adopt_rope_type(self) -> None:
        """rope_scaling's older Hugging Face key: {"type": "linear"} is {"rope_type": "linear"} (model/rope.py reads
        rope_type only, so left alone it would mean no scaling at all)."""
        s = self.rope_scaling
        if not isinstance(s, dict) or "type" not in s:
            return
        if "rope_type" in s and s["rope_type"] != s["type"]:
            raise ConfigError(N_("rope_scaling has type={type!r} and rope_type={rope_type!r}: keep one"),
                              type=s['type'], rope_type=s['rope_type'])
        self.rope_scaling = {"rope_type": s["type"], **{k: v for k, v in s.items() if k != "type"}}

    def _adopt_head_from_extra(self) -> None:
        """Older config.json files recorded the head in `extra`: move those keys into their fields."""
        if not isinstance(self.extra, dict) or not any(k in self.extra for k in HEAD_FIELDS):
            return
        for name in HEAD_FIELDS:
            if name in self.extra and getattr(self, name) is None:
                setattr(self, name, self.extra[name])
            elif name in self.extra and getattr(self, name) != self.extra[name]:
                raise ConfigError(N_("{name}={value!r} disagrees with extra[{name!r}]={extra!r}: keep one of them"),
                                  name=name, value=getattr(self, name), extra=self.extra[name])
        self.extra = {k: v for k, v in self.extra.items() if k not in HEAD_FIELDS}

    # -- derived sizes ----------------------------------------------------------------------------
    @property
    def head_dim_k(self) -> int:
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def kv_heads(self) -> int:
        return self.n_kv_heads if self.n_kv_heads is not None else self.n_heads

    @property
    def head_dim_v(self) -> int:
        return self.d_v if self.d_v is not None else self.head_dim_k

    @property
    def use_final_norm(self) -> bool:
        return self.final_norm if self.final_norm is not None else self.norm_placement in ("pre", "seed000")

    @property
    def shared_vocab(self) -> bool:
        return self.arch != "encoder-decoder" or self.src_vocab_size == self.tgt_vocab_size

    # -- checks -----------------------------------------------------------------------------------
    def validate(self) -> None:
        def need(cond: bool, msg: str, **fields: object) -> None:
            if not cond:
                raise ConfigError(msg, **fields)

        check_field_types(type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        check_choices(self)  # each Literal field (arch, norm_placement, norm_kind, ...): one of its names
        for name in ("d_model", "n_heads", "d_ff", "max_positions", "tgt_vocab_size"):
            need(getattr(self, name) > 0, N_("{name} must be positive, got {value}"), name=name,
                 value=getattr(self, name))
        if self.arch == "encoder-decoder":
            need(self.src_vocab_size > 0, N_("src_vocab_size must be positive, got {src_vocab_size}"),
                 src_vocab_size=self.src_vocab_size)
        need(
            self.d_k is not None or self.d_model % self.n_heads == 0,
            N_("d_model={d_model} is not divisible by n_heads={n_heads}: choose sizes that divide, or set d_k (and "
               "d_v) explicitly"), d_model=self.d_model, n_heads=self.n_heads,
        )
        need(self.head_dim_k > 0 and self.head_dim_v > 0, N_("d_k and d_v must be positive"))
        need(self.kv_heads > 0 and self.n_heads % self.kv_heads == 0,
             N_("n_kv_heads={n_kv_heads} must be a positive divisor of n_heads={n_heads}"), n_kv_heads=self.n_kv_heads,
             n_heads=self.n_heads)
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            need(0.0 <= getattr(self, name) < 1.0, N_("{name} must be in [0, 1), got {value}"), name=name,
                 value=getattr(self, name))
        need(0.0 < self.layer_norm_eps < math.inf,
             N_("layer_norm_eps must be a positive finite number, got {layer_norm_eps}"),
             layer_norm_eps=self.layer_norm_eps)
        need(self.type_vocab_size >= 0, N_("type_vocab_size must be >= 0 (0 = none), got {type_vocab_size}"),
             type_vocab_size=self.type_vocab_size)
        need(0 <= self.pad_id < self.tgt_vocab_size, N_("pad_id={pad_id} is outside the vocabulary"),
             pad_id=self.pad_id)
        need(self.decoder_start_id is None or 0 <= self.decoder_start_id < self.tgt_vocab_size,
             N_("decoder_start_id={decoder_start_id} is outside the target vocabulary"),
             decoder_start_id=self.decoder_start_id)
        need(self.positions != "sinusoidal" or self.d_model % 2 == 0, N_("sinusoidal positions need an even d_model"))
        if self.positions == "rope":
            need(self.head_dim_k % 2 == 0 and self.head_dim_k == self.head_dim_v, N_("rope needs d_k = d_v, even"))
            need(self.rope_theta > 1, N_("rope_theta must be > 1, got {rope_theta}"), rope_theta=self.rope_theta)
            self._validate_rope_scaling()
        n_layers = {"encoder-decoder": (self.n_encoder_layers, self.n_decoder_layers),
                    "encoder": (self.n_encoder_layers,), "decoder": (self.n_decoder_layers,)}[self.arch]
        need(all(n > 0 for n in n_layers), N_("a {arch} model needs at least one layer per stack"), arch=self.arch)
        self._validate_head()

    def _validate_rope_scaling(self) -> None:
        """rope_scaling: None, or a rope_type this code implements with the numbers that rule reads."""
        s = self.rope_scaling
        if s is None or s.get("rope_type", "default") == "default":
            return
        keys = {"linear": ("factor",), "llama3": ("factor", "low_freq_factor", "high_freq_factor",
                                                   "original_max_position_embeddings")}.get(s.get("rope_type"))
        if keys is None:
            raise ConfigError(N_("rope_scaling rope_type={get!r} is not supported (supported: default, linear, "
                                 "llama3)"), get=s.get('rope_type'))
        missing = [k for k in keys if not isinstance(s.get(k), (int, float)) or isinstance(s.get(k), bool)]
        if missing:
            raise ConfigError(N_("rope_scaling of type {rope_type!r} needs numbers for {missing}"),
                              rope_type=s['rope_type'], missing=', '.join(missing))
        for k in keys:  # every one divides a frequency or a length: 0 or less would train to NaN at step 1
            if not 0 < s[k] < math.inf:
                raise ConfigError(N_("rope_scaling {k} must be > 0 (and finite), got {s}"), k=k, s=s[k])

    def _validate_head(self) -> None:
        """The task head's fields: a head sits on an encoder; a classifier has K >= 2 classes (and K labels)."""
        if self.head is not None and self.arch != "encoder":
            raise ConfigError(N_("head={head!r}: task heads sit on an encoder model, not {arch!r} (arch='encoder', "
                                 "e.g. --preset bert-tiny)"), head=self.head, arch=self.arch)
        if self.head == "classification" and (self.n_classes is None or self.n_classes < 2):
            raise ConfigError(N_("head='classification' needs n_classes >= 2, got {n_classes}"),
                              n_classes=self.n_classes)
        if self.labels is not None:
            if not all(isinstance(label, str) for label in self.labels):
                raise ConfigError(N_("labels must be a list of strings, got {labels}"), labels=repr(self.labels)[:162])
            if len(self.labels) != self.n_classes:
                raise ConfigError(N_("labels names {n_labels} classes, n_classes={n_classes}"),
                                  n_labels=len(self.labels), n_classes=self.n_classes)
        if self.mask_id is not None and not 0 <= self.mask_id < self.tgt_vocab_size:
            raise ConfigError(N_("mask_id={mask_id} is outside the vocabulary [0, {tgt_vocab_size})"),
                              mask_id=self.mask_id, tgt_vocab_size=self.tgt_vocab_size)

    # -- presets and files ------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        if name not in PRESETS:
            raise ConfigError(N_("unknown preset {name!r}; valid presets: {presets}"), name=name,
                              presets=", ".join(PRESETS))
        fields = upgrade_fields({**PRESETS[name], **upgrade_fields(overrides)})
        reject_unknown_fields(cls, fields, f"config field(s) for preset {name!r}")
        return cls(**fields)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        data = upgrade_fields(data)
        reject_unknown_fields(cls, data, N_("config field(s)"))
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        data = read_json(path, N_("config file"))
        try:
            return cls.from_dict(data)
        except ConfigError as e:  # say which file holds the bad value
            raise ConfigError(N_("{path}: {e}"), path=path, e=e) from None


def upgrade_fields(data: Any) -> Any:
    """A mapping of config fields with the old names of RENAMED_FIELDS replaced by the new ones (older config.json
    files, `norm=pre` overrides); a one-line ConfigError if both names are given with different values."""
    return renamed_fields(data, RENAMED_FIELDS)


# -- memory -------------------------------------------------------------------------------------------------------
def parameter_bytes(c: ModelConfig) -> int:
    """Bytes (fp32) of the weights `build_model(c)` would allocate, positions tables included; exact up to the
    norms and biases, so that a model too big for the machine is refused before any of it is allocated."""
    d, hk, hv = c.d_model, c.n_heads * c.head_dim_k, c.n_heads * c.head_dim_v
    kk, kv = c.kv_heads * c.head_dim_k, c.kv_heads * c.head_dim_v  # GQA: fewer key/value heads
    attention = d * (hk + kk + kv) + hv * d + (hk + kk + kv + d)  # W_q, W_k, W_v, W_o and their biases
    ffn = (3 if c.ffn_kind == "gated" else 2) * d * c.d_ff + (2 if c.ffn_kind == "gated" else 1) * c.d_ff + d
    layer = attention + ffn + 4 * d  # + two LayerNorms
    positions = 0 if c.positions == "rope" else c.max_positions * d  # a table or a buffer; rope turns q and k instead
    stack_input = positions + c.type_vocab_size * d + 2 * d  # positions, token types, embedding norm
    if c.arch == "encoder-decoder":
        count = c.n_encoder_layers * layer + c.n_decoder_layers * (layer + attention + 2 * d)
        count += 2 * stack_input + c.tgt_vocab_size * d * (1 if c.tie_embeddings else 2) + c.tgt_vocab_size
        if not (c.tie_embeddings and c.shared_vocab):
            count += c.src_vocab_size * d
    elif c.arch == "encoder":
        count = c.n_encoder_layers * layer + stack_input + c.tgt_vocab_size * d
    else:
        count = c.n_decoder_layers * layer + stack_input + c.tgt_vocab_size * (d * (1 if c.tie_embeddings else 2) + 1)
    return 4 * count


def available_memory() -> int | None:
    """Bytes of memory this machine can give now (MemAvailable), else its physical memory; None if unknown."""
    try:
        with open("/proc/meminfo", encoding="ascii") as f:
            for line in f:
                if line.startswith("MemAvailable:"):
                    return int(line.split()[1]) * 1024
    except (OSError, ValueError, IndexError):
        pass
    try:
        return os.sysconf("SC_PHYS_PAGES") * os.sysconf("SC_PAGE_SIZE")
    except (ValueError, OSError, AttributeError):
        return None


def human_bytes(n: float) -> str:
    """12e12 -> '12 TB', 2.3e10 -> '23 GB', 5e6 -> '5 MB' (decimal units, as disks and `free -h --si` count)."""
    for unit, size in (("TB", 1e12), ("GB", 1e9), ("MB", 1e6)):
        if n >= size:
            return f"{n / size:.0f} {unit}"
    return f"{n / 1e3:.0f} kB"


def check_fits_in_memory(c: ModelConfig) -> None:
    """A one-line ConfigError, before anything is allocated, when the weights alone exceed the machine's memory."""
    need, have = parameter_bytes(c), available_memory()
    if have is not None and need > have:
        raise ConfigError(N_("the model would need {human_bytes} for its weights; this machine has {human_bytes2} "
                             "available: lower d_model, d_ff, the layer counts, the vocabulary or max_positions"),
                          human_bytes=human_bytes(need), human_bytes2=human_bytes(have))


# Table 3 of the paper. Shared source/target vocabulary of 37000 (WMT14 En-De BPE), tied embeddings.
_PAPER = dict(src_vocab_size=37000, tgt_vocab_size=37000, tie_embeddings=True)
_LLAMA = dict(arch="decoder", norm_placement="pre", norm_kind="rms", ffn_kind="gated", activation="silu",
              positions="rope", bias=False, generator_bias=False, scale_embeddings=False, layer_norm_eps=1e-5,
              dropout=0.0, tie_embeddings=True)
PRESETS: dict[str, dict[str, Any]] = {
    "paper-base": dict(_PAPER),
    "paper-big": dict(_PAPER, d_model=1024, n_heads=16, d_ff=4096, dropout=0.3),
    # (A) heads vs width at constant computation
    "paper-A-h1": dict(_PAPER, n_heads=1, d_k=512),
    "paper-A-h4": dict(_PAPER, n_heads=4, d_k=128),
    "paper-A-h16": dict(_PAPER, n_heads=16, d_k=32),
    "paper-A-h32": dict(_PAPER, n_heads=32, d_k=16),
    # (B) smaller key size d_k (d_v stays 64)
    "paper-B-dk16": dict(_PAPER, d_k=16, d_v=64),
    "paper-B-dk32": dict(_PAPER, d_k=32, d_v=64),
    # (C) model size
    "paper-C-N2": dict(_PAPER, n_encoder_layers=2, n_decoder_layers=2),
    "paper-C-N4": dict(_PAPER, n_encoder_layers=4, n_decoder_layers=4),
    "paper-C-N8": dict(_PAPER, n_encoder_layers=8, n_decoder_layers=8),
    "paper-C-d256": dict(_PAPER, d_model=256, d_k=32, d_v=32),
    "paper-C-d1024": dict(_PAPER, d_model=1024, d_k=128, d_v=128),
    "paper-C-ff1024": dict(_PAPER, d_ff=1024),
    "paper-C-ff4096": dict(_PAPER, d_ff=4096),
    # (E) learned positional embedding instead of sinusoids
    "paper-E-learned": dict(_PAPER, positions="learned"),
    # Small models for a CPU. Vocabulary sizes are placeholders: training sets them from the tokenizers.
    "tiny": dict(src_vocab_size=1000, tgt_vocab_size=1000, d_model=64, n_heads=4, d_ff=128,
                 n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_positions=256),
    "demo": dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4, d_ff=1024,
                 n_encoder_layers=3, n_decoder_layers=3, dropout=0.1, max_positions=256, tie_embeddings=False),
    "small": dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4, d_ff=1024,
                  n_encoder_layers=4, n_decoder_layers=4, dropout=0.1, max_positions=256, tie_embeddings=False),
    "gpt-tiny": dict(arch="decoder", tgt_vocab_size=1000, d_model=128, n_heads=4, d_ff=512,
                     n_decoder_layers=4, norm_placement="pre", activation="gelu", positions="learned",
                     scale_embeddings=False, generator_bias=False, dropout=0.1, max_positions=256),
    # Llama's boxes at toy size: RoPE, RMSNorm before each sublayer, SwiGLU, grouped-query attention, no biases
    "llama-tiny": dict(_LLAMA, tgt_vocab_size=1000, d_model=128, n_heads=4, n_kv_heads=2, d_ff=344,
                       n_decoder_layers=4, max_positions=256),
    # SmolLM2-135M's sizes (HuggingFaceTB; 134.5M parameters with tied embeddings): `params`, `shapes`
    "smollm2-135m": dict(_LLAMA, tgt_vocab_size=49152, d_model=576, n_heads=9, n_kv_heads=3, d_ff=1536,
                         n_decoder_layers=30, rope_theta=100000.0, max_positions=8192, pad_id=2),
    "bert-tiny": dict(arch="encoder", tgt_vocab_size=1000, d_model=128, n_heads=4, d_ff=512,
                      n_encoder_layers=4, activation="gelu", positions="learned", scale_embeddings=False,
                      type_vocab_size=2, embedding_norm=True, layer_norm_eps=1e-12, dropout=0.1,
                      attention_dropout=0.1, max_positions=256),
}

# The paper's parameter column (x 10^6) for the rows that have a preset here.
PAPER_PARAMS_M: dict[str, float] = {
    "paper-base": 65, "paper-big": 213, "paper-B-dk16": 58, "paper-B-dk32": 60, "paper-C-N2": 36,
    "paper-C-N4": 50, "paper-C-N8": 80, "paper-C-d256": 28, "paper-C-d1024": 168, "paper-C-ff1024": 53,
    "paper-C-ff4096": 90,
}

"""ModelConfig: every size of the architecture in one dataclass, with the paper's presets.

    config = ModelConfig.preset("paper-base")              # Table 3, base model: 65M parameters
    config = ModelConfig.preset("tiny", d_model=128)       # a preset with overrides
    config.save("config.json"); ModelConfig.load("config.json")

Names follow the paper: d_model, h (`n_heads`), d_k, d_v, d_ff, N (`n_encoder_layers`, `n_decoder_layers`).
"""

from __future__ import annotations

import dataclasses
import json
import math
import os
import stat
import types
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass, field
from pathlib import Path
from typing import Any

from scratchformer.errors import ConfigError

ARCHS = ("encoder-decoder", "encoder", "decoder")
NORMS = ("post", "pre")
POSITIONS = ("sinusoidal", "sinusoidal-concat", "learned")
ACTIVATIONS = ("relu", "gelu", "gelu-tanh", "silu")


@dataclass
class ModelConfig:
    """The architecture. Defaults are the paper's base model (Table 3, first row)."""

    arch: str = "encoder-decoder"  # "encoder-decoder" (paper) | "encoder" (BERT-like) | "decoder" (GPT-like)
    src_vocab_size: int = 37000  # encoder vocabulary (unused by single-stack models)
    tgt_vocab_size: int = 37000  # decoder vocabulary; the one vocabulary of single-stack models
    d_model: int = 512
    n_heads: int = 8  # h
    d_k: int | None = None  # per-head query/key width; None -> d_model // n_heads
    d_v: int | None = None  # per-head value width; None -> d_k (the paper keeps d_v = d_k)
    d_ff: int = 2048
    n_encoder_layers: int = 6
    n_decoder_layers: int = 6
    dropout: float = 0.1  # P_drop: sublayer outputs and embedding + position sums
    attention_dropout: float = 0.0  # on the attention weights (nn.Transformer and BERT use P_drop here)
    activation_dropout: float = 0.0  # inside the FFN, after the activation
    norm: str = "post"  # "post": LayerNorm(x + Sublayer(x)) (paper) | "pre": x + Sublayer(LayerNorm(x))
    final_norm: bool | None = None  # LayerNorm after each stack; None -> True for pre-norm, False for post
    positions: str = "sinusoidal"  # interleaved sin/cos (paper) | "sinusoidal-concat" (sin|cos halves) | "learned"
    activation: str = "relu"  # "relu" (paper) | "gelu" (exact erf) | "gelu-tanh" | "silu" (swish: Marian)
    tie_embeddings: bool = True  # share target embedding and pre-softmax weights (and source, if same vocab)
    scale_embeddings: bool = True  # multiply token embeddings by sqrt(d_model) (paper section 3.4)
    max_len: int = 512  # longest sequence the positions cover
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
    extra: dict[str, Any] = field(default_factory=dict)  # free-form notes (e.g. where weights came from)

    def __post_init__(self) -> None:
        self.validate()

    # -- derived sizes ----------------------------------------------------------------------------
    @property
    def head_dim_k(self) -> int:
        return self.d_k if self.d_k is not None else self.d_model // self.n_heads

    @property
    def head_dim_v(self) -> int:
        return self.d_v if self.d_v is not None else self.head_dim_k

    @property
    def use_final_norm(self) -> bool:
        return self.final_norm if self.final_norm is not None else self.norm == "pre"

    @property
    def shared_vocab(self) -> bool:
        return self.arch != "encoder-decoder" or self.src_vocab_size == self.tgt_vocab_size

    # -- checks -----------------------------------------------------------------------------------
    def validate(self) -> None:
        def need(cond: bool, msg: str) -> None:
            if not cond:
                raise ConfigError(msg)

        check_field_types(type(self), {f.name: getattr(self, f.name) for f in dataclasses.fields(self)})
        need(self.arch in ARCHS, f"arch={self.arch!r} is not one of {', '.join(ARCHS)}")
        need(self.norm in NORMS, f"norm={self.norm!r} is not one of {', '.join(NORMS)}")
        need(self.positions in POSITIONS, f"positions={self.positions!r} is not one of {', '.join(POSITIONS)}")
        need(self.activation in ACTIVATIONS, f"activation={self.activation!r} is not one of {ACTIVATIONS}")
        for name in ("d_model", "n_heads", "d_ff", "max_len", "tgt_vocab_size"):
            need(getattr(self, name) > 0, f"{name} must be positive, got {getattr(self, name)}")
        if self.arch == "encoder-decoder":
            need(self.src_vocab_size > 0, f"src_vocab_size must be positive, got {self.src_vocab_size}")
        need(
            self.d_k is not None or self.d_model % self.n_heads == 0,
            f"d_model={self.d_model} is not divisible by n_heads={self.n_heads}: "
            "choose sizes that divide, or set d_k (and d_v) explicitly",
        )
        need(self.head_dim_k > 0 and self.head_dim_v > 0, "d_k and d_v must be positive")
        for name in ("dropout", "attention_dropout", "activation_dropout"):
            need(0.0 <= getattr(self, name) < 1.0, f"{name} must be in [0, 1), got {getattr(self, name)}")
        need(0.0 < self.layer_norm_eps < math.inf,
             f"layer_norm_eps must be a positive finite number, got {self.layer_norm_eps}")
        need(self.type_vocab_size >= 0, f"type_vocab_size must be >= 0 (0 = none), got {self.type_vocab_size}")
        need(0 <= self.pad_id < self.tgt_vocab_size, f"pad_id={self.pad_id} is outside the vocabulary")
        need(self.decoder_start_id is None or 0 <= self.decoder_start_id < self.tgt_vocab_size,
             f"decoder_start_id={self.decoder_start_id} is outside the target vocabulary")
        need(self.positions != "sinusoidal" or self.d_model % 2 == 0, "sinusoidal positions need an even d_model")
        n_layers = {"encoder-decoder": (self.n_encoder_layers, self.n_decoder_layers),
                    "encoder": (self.n_encoder_layers,), "decoder": (self.n_decoder_layers,)}[self.arch]
        need(all(n > 0 for n in n_layers), f"a {self.arch} model needs at least one layer per stack")

    # -- presets and files ------------------------------------------------------------------------
    @classmethod
    def preset(cls, name: str, **overrides: Any) -> ModelConfig:
        if name not in PRESETS:
            raise ConfigError(f"unknown preset {name!r}; valid presets: {', '.join(PRESETS)}")
        fields = {**PRESETS[name], **overrides}
        reject_unknown_fields(cls, fields, f"config field(s) for preset {name!r}")
        return cls(**fields)

    def replace(self, **changes: Any) -> ModelConfig:
        return dataclasses.replace(self, **changes)

    def to_dict(self) -> dict[str, Any]:
        return dataclasses.asdict(self)

    @classmethod
    def from_dict(cls, data: dict[str, Any]) -> ModelConfig:
        reject_unknown_fields(cls, data, "config field(s)")
        return cls(**data)

    def save(self, path: str | Path) -> None:
        Path(path).write_text(json.dumps(self.to_dict(), indent=2) + "\n", encoding="utf-8")

    @classmethod
    def load(cls, path: str | Path) -> ModelConfig:
        data = read_json(path, "config file")
        try:
            return cls.from_dict(data)
        except ConfigError as e:  # say which file holds the bad value
            raise ConfigError(f"{path}: {e}") from None


def reject_unknown_fields(cls: type, data: Mapping[str, Any], what: str,
                          label: Callable[[str], str] = str) -> None:
    """A one-line ConfigError if `data` is not a mapping, names keys that are not fields of the dataclass `cls`,
    or holds a value whose type does not fit its field's type hint (what a JSON file can get wrong)."""
    if not isinstance(data, Mapping):
        raise ConfigError(f"{what} must be a JSON object of field: value pairs, got {type(data).__name__}")
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = {str(k) for k in data} - known
    if unknown:
        raise ConfigError(f"unknown {what} {sorted(unknown)}; known fields: {', '.join(sorted(known))}")
    check_field_types(cls, data, label)


# -- types of dataclass fields (JSON files can hold anything) ------------------------------------------------------
_HINTS: dict[type, dict[str, Any]] = {}


def _field_hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` fits the type hint: bool is not an int, an int is a float, containers by their outer type."""
    origin = typing.get_origin(hint)
    if origin in (typing.Union, types.UnionType):
        return any(_fits(value, a) for a in typing.get_args(hint))
    if hint is Any:
        return True
    if hint is type(None):
        return value is None
    if hint is bool:
        return isinstance(value, bool)
    if hint is int:
        return isinstance(value, int) and not isinstance(value, bool)
    if hint is float:
        return isinstance(value, (int, float)) and not isinstance(value, bool)
    kind = origin or hint
    return isinstance(value, kind) if isinstance(kind, type) else True


def _type_name(hint: Any) -> str:
    """The Python name of a type hint: "int", "int or None", "dict"."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    if hint is type(None):
        return "None"
    kind = typing.get_origin(hint) or hint
    return getattr(kind, "__name__", str(kind))


def _json_words(hint: Any) -> str:
    """What a JSON file must hold for that hint: "an integer or null", "true or false", "a JSON object"."""
    if typing.get_origin(hint) in (typing.Union, types.UnionType):
        return " or ".join(_json_words(a) for a in typing.get_args(hint))
    kind = typing.get_origin(hint) or hint
    words = {int: "an integer", float: "a number", bool: "true or false", str: "a string", dict: "a JSON object",
             list: "a JSON list", type(None): "null"}
    return words.get(kind, _type_name(hint))


def check_field_types(cls: type, data: Mapping[str, Any], label: Callable[[str], str] = str) -> None:
    """A one-line ConfigError naming the first field of `data` whose value does not fit the type hint of that field
    of the dataclass `cls` ("d_model='256' must be int (an integer), got str"); keys that are not fields are left
    alone. `label` names a field in the message (TrainConfig: its command-line flag)."""
    hints = _field_hints(cls)
    for name, value in data.items():
        if name in hints and not _fits(value, hints[name]):
            shown = repr(value) if len(repr(value)) <= 60 else repr(value)[:57] + "..."
            raise ConfigError(f"{label(name)}={shown} must be {_type_name(hints[name])} ({_json_words(hints[name])}), "
                              f"got {type(value).__name__}")


# -- files --------------------------------------------------------------------------------------------------------
def regular_file(path: str | Path, error: type[Exception] = ConfigError) -> Path:
    """`path`, checked before it is opened: a FIFO would block the read for ever, a folder or a device fails later
    with a worse message. A missing path passes (each caller words that case itself)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as e:
        raise error(f"{path}: cannot read it: {e.strerror}") from None
    if not stat.S_ISREG(mode):
        kind = "a folder" if stat.S_ISDIR(mode) else "a FIFO" if stat.S_ISFIFO(mode) else "a device or socket"
        raise error(f"{path} is not a regular file (it is {kind})")
    return path


def read_json(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON file's object, or a one-line ConfigError naming `what` and the file. A UTF-8 BOM is allowed."""
    path = regular_file(path)
    try:
        data = json.loads(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(f"{what} {path} does not exist") from None
    except UnicodeDecodeError as e:
        raise ConfigError(f"{what} {path} is not UTF-8 text: {e.reason} at byte {e.start}") from None
    except json.JSONDecodeError as e:
        raise ConfigError(f"{what} {path} is not valid JSON: {e}") from None
    if not isinstance(data, dict):
        raise ConfigError(f"{what} {path} must hold a JSON object, got {type(data).__name__}")
    return data


# -- memory -------------------------------------------------------------------------------------------------------
def parameter_bytes(c: ModelConfig) -> int:
    """Bytes (fp32) of the weights `build_model(c)` would allocate, positions tables included; exact up to the
    norms and biases, so that a model too big for the machine is refused before any of it is allocated."""
    d, hk, hv = c.d_model, c.n_heads * c.head_dim_k, c.n_heads * c.head_dim_v
    attention = d * (2 * hk + hv) + hv * d + (2 * hk + hv + d)  # W_q, W_k, W_v, W_o and their biases
    layer = attention + 2 * d * c.d_ff + c.d_ff + d + 4 * d  # + FFN + two LayerNorms
    stack_input = c.max_len * d + c.type_vocab_size * d + 2 * d  # positions (a table or a buffer), types, norm
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
        raise ConfigError(f"the model would need {human_bytes(need)} for its weights; this machine has "
                          f"{human_bytes(have)} available: lower d_model, d_ff, the layer counts, the vocabulary "
                          "or max_len")


# Table 3 of the paper. Shared source/target vocabulary of 37000 (WMT14 En-De BPE), tied embeddings.
_PAPER = dict(src_vocab_size=37000, tgt_vocab_size=37000, tie_embeddings=True)
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
                 n_encoder_layers=2, n_decoder_layers=2, dropout=0.0, max_len=256),
    "demo": dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4, d_ff=1024,
                 n_encoder_layers=3, n_decoder_layers=3, dropout=0.1, max_len=256, tie_embeddings=False),
    "small": dict(src_vocab_size=8000, tgt_vocab_size=8000, d_model=256, n_heads=4, d_ff=1024,
                  n_encoder_layers=4, n_decoder_layers=4, dropout=0.1, max_len=256, tie_embeddings=False),
    "gpt-tiny": dict(arch="decoder", tgt_vocab_size=1000, d_model=128, n_heads=4, d_ff=512,
                     n_decoder_layers=4, norm="pre", activation="gelu", positions="learned",
                     scale_embeddings=False, generator_bias=False, dropout=0.1, max_len=256),
    "bert-tiny": dict(arch="encoder", tgt_vocab_size=1000, d_model=128, n_heads=4, d_ff=512,
                      n_encoder_layers=4, activation="gelu", positions="learned", scale_embeddings=False,
                      type_vocab_size=2, embedding_norm=True, layer_norm_eps=1e-12, dropout=0.1,
                      attention_dropout=0.1, max_len=256),
}

# The paper's parameter column (x 10^6) for the rows that have a preset here.
PAPER_PARAMS_M: dict[str, float] = {
    "paper-base": 65, "paper-big": 213, "paper-B-dk16": 58, "paper-B-dk32": 60, "paper-C-N2": 36,
    "paper-C-N4": 50, "paper-C-N8": 80, "paper-C-d256": 28, "paper-C-d1024": 168, "paper-C-ff1024": 53,
    "paper-C-ff4096": 90,
}

"""DecodingOptions: every knob of translation in one frozen object, kept beside a run as RUN_DIR/decoding.json (as
Hugging Face keeps generation_config.json beside a model). translate, evaluate, serve and report start from the
run's file; a flag given on the command line wins; the flags themselves are made from FLAGS below.

    {"alpha": 1.5, "split_sentences": true, "repair_copies": true, "chosen": "mean valid BLEU ..."}   (models/en-zh)

    engine              torch (our own decoder), ctranslate2 or onnxruntime (engines/backends.py: ENGINES)
    beam                beam width, 1 = greedy (the paper: 4)
    alpha               the GNMT length penalty's exponent ((5 + |Y|) / 6) ** alpha (the paper: 0.6)
    max_len             most output tokens per sentence; None: source length + 50, the paper's rule
    batch_size          most sentences decoded together
    max_tokens          most *padded source tokens* in one decoding batch (rows x longest source); None: no cap
    n_best              hypotheses per input (<= beam)
    no_repeat_ngram     never repeat an n-gram of this many target tokens (0 = off)
    repetition_penalty  divide the logits of tokens already output by this (1 = off)
    align               word alignments from cross-attention with each hypothesis
    split_sentences     a pre-processor: each text translated sentence by sentence (decoding/sentences.py)
    repair_copies       a post-processor: names, numbers, paths the model miscopied put back (decoding/copies.py)
    int8                dynamic int8 weights (torch: quantize_int8; ctranslate2: its own int8 compute type)
    ensemble            more weights files of the run folder, averaged with model.safetensors (decoding/ensemble.py)
    step                torch's decoding step: eager (the lean step), captured (compiled ahead with AOTInductor and
                        cached per user, CPU, torch, dtype and weights; compiles on first use, saying so), or auto
                        (a cached package unless measured slower here; with none, a compile only where it pays:
                        engines/torch_engine.py's rule, docs/performance.md)
    dtype               torch's weights and activations while decoding: fp32, bf16, or auto (bf16 where this CPU
                        has AVX512-BF16 or AMX and it measured faster: autotune.decoding_dtype)
    chosen              free text: how these values were chosen (people only)

An old file (the four keys alpha, split_sentences, repair_copies, chosen, or with ensemble) loads as it is; every
key it leaves out takes the default above. A file is checked once when loaded (types, ranges: a one-line
ConfigError naming it) and the options once more against the model they decode (`check_model`: beam vs the
vocabulary, max_len vs the positions, the search's memory) where the Translator is made.
"""

from __future__ import annotations

import argparse
import math
import numbers
import re
from collections.abc import Callable, Collection, Iterable, Mapping
from dataclasses import asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any

from scratchformer.config.fields import read_json, reject_unknown_fields
from scratchformer.config.model import ModelConfig, available_memory, human_bytes
from scratchformer.errors import ConfigError
from scratchformer.i18n import N_, _

MEMBER_FILE = re.compile(r"[\w.-]+\.safetensors")  # a file name in the run folder, no path
MAX_ALPHA = 10.0  # GNMT tuned alpha in [0.6, 1]; ((5 + 512) / 6) ** 10 is still a float
MIN_PENALTY = 0.01  # and 1 / 0.01 = 100 at most: far beyond any useful value, and logits / P stay finite
PAPER_EXTRA_LEN = 50  # section 6.1: "maximum output length to input length + 50"
DEFAULT_MAX_NEW = 60  # generate: new tokens per prompt when none are asked for (fewer if max_len leaves no room)
STEPS = ("auto", "eager", "captured")  # the torch engine's decoding step (decoding/captured.py)
DTYPES = ("auto", "fp32", "bf16")  # the torch engine's decoding dtype


# Hugging Face and CTranslate2 rank finished beams by logP / |Y|^lp, GNMT (ours) by logP / ((5 + |Y|) / 6)^alpha.
# Their slopes in log |Y| are lp and alpha * |Y| / (5 + |Y|): with alpha = 0.6 they agree at |Y| = 25 for lp = 0.5.
# An export writes the lp of the run's alpha at SLOPE_AT (length_penalty_for).
SLOPE_AT = 25


def length_penalty_for(alpha: float) -> float:
    """A client's |Y|^lp length_penalty with the slope of GNMT's `alpha` at |Y| = SLOPE_AT (0.6 -> 0.5, 1.5 -> 1.25):
    what the HF, ONNX and CTranslate2 exports carry for the run's alpha."""
    return round(alpha * SLOPE_AT / (5 + SLOPE_AT), 4)


def check_alpha(alpha: float, named: str) -> None:
    """A one-line ConfigError unless 0 <= alpha <= MAX_ALPHA (NaN fails too; a huge alpha overflows
    ((5 + |Y|) / 6) ** alpha); `named` is how the message names it (`--alpha -1`, `alpha=-1`)."""
    if not 0 <= alpha <= MAX_ALPHA:
        raise ConfigError(f"{named}: the length penalty's exponent must be in [0, {MAX_ALPHA}] "
                          "(0 = off; the paper uses 0.6)")


def check_repetition(no_repeat_ngram: int, repetition_penalty: float, names: tuple[str, str]) -> None:
    """One-line errors for a negative n-gram size and a penalty that is not a positive finite number."""
    if isinstance(no_repeat_ngram, bool) or not isinstance(no_repeat_ngram, numbers.Integral) or no_repeat_ngram < 0:
        raise ConfigError(f"{names[0]}: the n-gram size must be a whole number >= 0 (0 = off; fairseq users give 3)")
    if not (isinstance(repetition_penalty, numbers.Real) and math.isfinite(repetition_penalty)
            and MIN_PENALTY <= repetition_penalty <= 1 / MIN_PENALTY):
        raise ConfigError(f"{names[1]}: the penalty must be a positive number in [{MIN_PENALTY}, {1 / MIN_PENALTY:g}] "
                          "(1 = off, > 1 discourages repeats; CTRL used 1.2)")


def check_members(names: list, model_file: str) -> None:
    """A one-line ConfigError unless `names` are distinct safetensors file names (no folders: members live in the
    run folder, so a decoding.json cannot point outside it) other than `model_file`, the run's own weights."""
    for name in names:
        if not isinstance(name, str) or not MEMBER_FILE.fullmatch(name) or name == model_file:
            raise ConfigError(f"ensemble member {name!r}: give the name of a .safetensors file in the run folder, "
                              f"without a folder, other than {model_file} (the first member)")
    if len(set(names)) < len(names):
        raise ConfigError(f"ensemble {names}: a member is named twice")


def search_bytes(config: ModelConfig, rows: int, steps: int) -> int:
    """Rough bytes a search of `rows` decoding rows (sentences x beams) over `steps` tokens holds at its peak: the
    self-attention KV cache (fp32, every decoder layer) and three (rows, V) score tensors per step."""
    kv = config.n_decoder_layers * steps * config.n_heads * (config.head_dim_k + config.head_dim_v) * 4
    return rows * (kv + 3 * config.tgt_vocab_size * 4 + steps * 8)


@dataclass(frozen=True)
class DecodingOptions:
    """Every decoding option (the module docstring says each); `pick` lays flags over them. The first five fields
    keep the order of the file's first version (positional construction still works)."""

    alpha: float = 0.6
    split_sentences: bool = False
    repair_copies: bool = False
    chosen: str = ""
    ensemble: list[str] = field(default_factory=list)
    engine: str = "torch"
    beam: int = 4
    max_len: int | None = None
    batch_size: int = 32
    max_tokens: int | None = None
    n_best: int = 1
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    align: bool = False
    int8: bool = False
    step: str = "auto"
    dtype: str = "auto"

    def pick(self, **flags: Any) -> DecodingOptions:
        """These options with each flag that was given (not None) in place of the run's value."""
        return replace(self, **{k: v for k, v in flags.items() if v is not None})

    def text_level(self) -> list[str]:
        """The pre- and post-processors turned on, by name (they run around any engine's search)."""
        return [name for name in ("split_sentences", "repair_copies") if getattr(self, name)]

    def options(self) -> dict[str, Any]:
        """What a result reports of how it was decoded: alpha and the text-level options (evaluate's JSON)."""
        return {"alpha": self.alpha, "split_sentences": self.split_sentences, "repair_copies": self.repair_copies}

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults, by name (what an engine must support)."""
        default = DecodingOptions()
        return {f.name: getattr(self, f.name) for f in fields(self)
                if f.name != "chosen" and getattr(self, f.name) != getattr(default, f.name)}

    def to_dict(self) -> dict[str, Any]:
        return asdict(self)

    def _namer(self, cli: bool | Collection[str]) -> Callable[[str], str]:
        return lambda n: named(n, getattr(self, n), cli)

    def check(self, cli: bool | Collection[str] = False) -> None:
        """One-line ConfigErrors for options that cannot work on any model: sizes < 1, a bad alpha, n_best outside
        [1, beam], bad repetition options. `cli` names them as flags (`--beam 0`), else as fields (`beam=0`)."""
        name = self._namer(cli)
        for size in ("beam", "batch_size"):
            if not isinstance(getattr(self, size), int) or getattr(self, size) < 1:
                raise ConfigError(f"{name(size)}: must be >= 1" + (" (1 = greedy)" if size == "beam" else ""))
        for size in ("max_tokens", "max_len"):
            if getattr(self, size) is not None and getattr(self, size) < 1:
                raise ConfigError(f"{name(size)}: must be >= 1 (or left unset)")
        if self.step not in STEPS:
            raise ConfigError(f"{name('step')}: must be one of {', '.join(STEPS)}")
        if self.dtype not in DTYPES:
            raise ConfigError(f"{name('dtype')}: must be one of {', '.join(DTYPES)}")
        if self.int8 and self.dtype == "bf16":
            raise ConfigError(f"{name('int8')} with {name('dtype')}: int8 weights compute in fp32; choose one")
        if self.n_best < 1:
            raise ConfigError(f"{name('n_best')}: must be >= 1")
        if self.n_best > self.beam:
            raise ConfigError(f"{name('n_best')}: beam search keeps only {self.beam} hypotheses ({name('beam')}); give "
                              f"a beam of at least {self.n_best}")
        check_repetition(self.no_repeat_ngram, self.repetition_penalty,
                         (name("no_repeat_ngram"), name("repetition_penalty")))
        check_alpha(self.alpha, name("alpha"))

    def check_model(self, config: ModelConfig, members: int = 1, cli: bool | Collection[str] = False) -> None:
        """check(), then against the model that decodes: it must translate, max_len within its positions, a beam no
        wider than its vocabulary, and the worst batch's search within this machine's memory (`members`: models
        decoded together, an ensemble, each with its own KV cache)."""
        if config.arch != "encoder-decoder":
            from scratchformer.errors import InputError

            raise InputError(f"translation needs an encoder-decoder model, got a {config.arch} one")
        self.check(cli)
        name = self._namer(cli)
        cap = config.max_positions
        if self.max_len is not None and self.max_len > cap:
            raise ConfigError(f"{name('max_len')}: the model's positions end at max_len={cap}; give at most {cap} "
                              f"output tokens (unset: source length + {PAPER_EXTRA_LEN})")
        if self.beam > config.tgt_vocab_size:
            raise ConfigError(f"{name('beam')}: wider than the {config.tgt_vocab_size}-token target vocabulary; "
                              "beams of 4-12 are usual")
        steps = min(cap, self.max_len or cap + PAPER_EXTRA_LEN)
        need, have = members * search_bytes(config, self.batch_size * self.beam, steps), available_memory()
        if have is not None and need > have:
            raise ConfigError(f"{name('beam')} with {name('batch_size')}: the search would need about "
                              f"{human_bytes(need)}; this machine has {human_bytes(have)} available: lower the beam "
                              "or the batch size")

    @classmethod
    def load(cls, path: str | Path, model_file: str) -> DecodingOptions:
        """decoding.json checked (`model_file`: the run's weights, which no ensemble member may name); a one-line
        ConfigError naming the file for anything wrong in it."""
        data = read_json(path, "decoding config")
        try:
            reject_unknown_fields(cls, data, "decoding config field(s)")
            options = cls(**{**data, **({"alpha": float(data["alpha"])} if "alpha" in data else {})})
            options.check()
            check_members(options.ensemble, model_file)
            return options
        except ConfigError as e:
            raise ConfigError(f"decoding config {path}: {e}") from None


def named(name: str, value: object, cli: bool | Collection[str]) -> str:
    """How a message names an option: `--max-len 7` for the command line, `max_len=7` for the API. `cli` may be
    the names of the flags the user gave: another option came from the run's decoding.json and is named so
    (`batch_size=100000 from decoding.json`), never as a flag the user did not type."""
    if cli is False:
        return f"{name}={value}"
    if cli is not True and name not in cli:
        return f"{name}={value} from decoding.json"
    flag = f"--{name.replace('_', '-')}"
    return flag if isinstance(value, bool) else f"{flag} {value}"


# -- the flags of translate, evaluate, serve and report, made from one table ------------------------------------------

@dataclass(frozen=True)
class Flag:
    """One decoding option as a command-line flag; `commands` lists those that take it."""

    name: str
    help: str
    commands: frozenset[str]
    kind: Callable[[str], Any] | None = None  # None: a --x / --no-x switch
    metavar: str | None = None


ALL = frozenset({"translate", "evaluate", "serve", "report"})
TEXT = frozenset({"translate", "evaluate", "report"})  # serve: a request sets n_best (alternatives) itself
FLAGS: tuple[Flag, ...] = (
    Flag("engine", N_("decode with our PyTorch code or an exported copy (cached in the run directory)"), ALL, str),
    Flag("beam", N_("beam size (1 = greedy; the paper uses 4)"), ALL, int, "K"),
    Flag("alpha", N_("GNMT length penalty ((5+|Y|)/6)^alpha"), ALL, float, "A"),
    Flag("max_len", N_("most output tokens per sentence (unset: source length + 50, the paper's rule)"), ALL, int, "N"),
    Flag("batch_size", N_("most sentences decoded together"), ALL, int, "N"),
    Flag("max_tokens", N_("most padded source tokens (sentences x the longest) in one decoding batch (unset: no cap)"),
         TEXT, int, "N"),  # serve: --max-batch-tokens is its budget (decoding.json's max_tokens still applies)
    Flag("n_best", N_("the N best hypotheses (N <= --beam), each as a line `text<TAB>score`"), frozenset({"translate"}),
         int, "N"),
    Flag("no_repeat_ngram", N_("never repeat an n-gram of N target tokens (fairseq's; 0 = off, 3 is usual)"), ALL, int,
         "N"),
    Flag("repetition_penalty", N_("divide the logits of tokens already output by P (CTRL's; 1 = off)"), ALL, float,
         "P"),
    Flag("align", N_("add word alignments `i-j` (source-target subword indices, from the last decoder layer's "
         "cross-attention averaged over heads) after a TAB, or as \"alignment\" in jsonl"), frozenset({"translate"})),
    Flag("split_sentences", N_("translate each line sentence by sentence (cut after . ! ? before a capital or digit, "
         "after 。！？) and join the parts"), ALL),
    Flag("repair_copies", N_("put back names, numbers, paths and options the model miscopied from the source "
         "(outputs with CJK text only; decoding/copies.py)"), ALL),
    Flag("int8", N_("dynamic int8 quantisation of the Linear layers (CPU)"), ALL),
    Flag("step", N_("torch's decoding step: eager, captured (compiled once with AOTInductor, cached in your cache "
         "folder; the first use says it compiles) or auto (a cached package; with none, translate --file compiles "
         "when the measured compile cost is below the time it saves, serve compiles in the background)"), ALL, str,
         "{auto,eager,captured}"),
    Flag("dtype", N_("torch's decoding dtype: fp32, bf16 (outputs may differ slightly) or auto (bf16 where the "
         "CPU has AVX512-BF16 or AMX and it measured faster)"), ALL, str, "{auto,fp32,bf16}"),
)


def _shown(value: Any) -> str:
    return N_("unset") if value is None else N_("on") if value is True else N_("off") if value is False else str(value)


def add_decoding_args(group: Any, command: str, engines: Iterable[str] = ()) -> None:
    """The decoding flags `command` takes, from FLAGS: each defaults to None, which means the run's decoding.json
    (and the default above where the file says nothing), so --help shows that one default. `engines`: the choices of
    --engine (engines/backends.py's ENGINES; any container, looked up only when used)."""
    default = DecodingOptions()
    for f in FLAGS:
        if command not in f.commands:
            continue
        flag = "--" + f.name.replace("_", "-")
        help = _("{help} (default: the run's decoding.json, else {value})").format(
            help=_(f.help), value=_(_shown(getattr(default, f.name))))
        if f.kind is None:
            group.add_argument(flag, action=argparse.BooleanOptionalAction, default=None, help=help)
        elif f.name == "engine":  # a metavar: argparse would read the choices (import torch) to make one
            group.add_argument(flag, default=None, choices=engines or None, metavar="ENGINE",
                               help=help.replace(" (default", ": %(choices)s (default", 1))
        else:
            group.add_argument(flag, type=f.kind, default=None, metavar=f.metavar, help=help)


def given_flags(args: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The decoding flags that were given (not None), by option name."""
    get = args.get if isinstance(args, Mapping) else (lambda name: getattr(args, name, None))
    return {f.name: get(f.name) for f in FLAGS if get(f.name) is not None}


def from_args(run_options: DecodingOptions, args: argparse.Namespace | Mapping[str, Any]) -> DecodingOptions:
    """The run's options with every decoding flag that was given laid over them."""
    return run_options.pick(**given_flags(args))

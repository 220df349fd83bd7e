"""DecodingOptions: every knob of translation in one frozen object, kept beside a run as RUN_DIR/decoding.json (as
Hugging Face keeps generation_config.json beside a model). translate, evaluate, serve and report start from the
run's file; a flag or a `--set KEY=VALUE` given on the command line wins; both are made from FLAGS below.

    {"alpha": 1.5, "split_sentences": true, "repair_copies": true, "chosen": "mean valid BLEU ..."}   (models/en-zh)

    engine              torch (our own decoder), ctranslate2, onnxruntime or keras (Engine; engines/backends.py)
    beam                beam width, 1 = greedy (the paper: 4)
    alpha               the GNMT length penalty's exponent ((5 + |Y|) / 6) ** alpha (the paper: 0.6)
    max_output_len      most output tokens per sentence; None: source length + 50, the paper's rule
    batch_size          most sentences decoded together
    max_tokens          most *padded source tokens* in one decoding batch (rows x longest source); None: no cap
    n_best              hypotheses per input (<= beam)
    no_repeat_ngram     never repeat an n-gram of this many target tokens (0 = off)
    repetition_penalty  divide the logits of tokens already output by this (1 = off)
    align               word alignments from cross-attention with each hypothesis
    split_sentences     a pre-processor: each text translated sentence by sentence (decoding/sentences.py)
    repair_copies       a post-processor: names, numbers, paths the model miscopied put back (decoding/copies.py)
    ensemble            more weights files of the run folder, averaged with model.safetensors (decoding/ensemble.py)
    step                torch's decoding step: eager (the lean step), captured (compiled ahead with AOTInductor and
                        cached per user, CPU, torch, dtype and weights; compiles on first use, saying so), or auto
                        (a cached package unless measured slower here; with none, a compile only where it pays:
                        engines/torch_engine.py's rule, docs/performance.md)
    dtype               what decodes in, as CTranslate2's compute_type: auto, fp32, bf16 (torch: where this CPU has
                        AVX512-BF16 or AMX; auto picks it where it measured faster) or int8 (CTranslate2's own)
    chosen              free text: how these values were chosen (people only)

Checked once: a DecodingOptions checks itself whenever one is made (`__post_init__`: types, choices, ranges, n_best
vs beam), however it is made (`pick`, `load`, the flags), and once more against the model and the backend where a
Translator is made (`check_for`, its only caller): the architecture, max_output_len vs the positions, beam vs the
vocabulary, the search's memory, the options the backend does not have. A message names each option the way the
user gave it (`named`): `--beam 0`, `--set alpha=-1`, `beam=4 from decoding.json`, `beam=0`.

An old file loads: every key it leaves out takes the default above, `max_len` is read as max_output_len and
`"int8": true` as dtype int8 (RENAMED, upgrade).
"""

from __future__ import annotations

import math
import numbers
import re
from collections.abc import Collection, Mapping
from dataclasses import MISSING, asdict, dataclass, field, fields, replace
from pathlib import Path
from typing import Any, Literal, get_args

from scratchformer.config.budget import PAPER_EXTRA_LEN, output_budget
from scratchformer.config.fields import check_field_types, literal_names, read_json, reject_unknown_fields
from scratchformer.config.model import ModelConfig, available_memory, human_bytes
from scratchformer.errors import ConfigError, InputError, Message, Text
from scratchformer.i18n import N_

MEMBER_FILE = re.compile(r"[\w.-]+\.safetensors")  # a file name in the run folder, no path
MAX_ALPHA = 10.0  # GNMT tuned alpha in [0.6, 1]; ((5 + 512) / 6) ** 10 is still a float
MIN_PENALTY = 0.01  # and 1 / 0.01 = 100 at most: far beyond any useful value, and logits / P stay finite
DEFAULT_MAX_NEW = 60  # generate: new tokens per prompt when none are asked for (fewer if max_len leaves no room)

# The typed choices, each written once: engines/backends.py's ENGINES is keyed by Engine's names.
Engine = Literal["torch", "ctranslate2", "onnxruntime", "keras"]
Step = Literal["auto", "eager", "captured"]  # the torch engine's decoding step (decoding/captured.py)
Dtype = Literal["auto", "fp32", "bf16", "int8"]  # as CTranslate2's compute_type
ENGINES, STEPS, DTYPES = get_args(Engine), get_args(Step), get_args(Dtype)
RENAMED = {"max_len": "max_output_len"}  # decoding.json keys of older versions -> today's names

# Options only some backends honour; a backend lists those it has in SUPPORTS (dtype int8 and bf16 by those names).
# Every other option (beam, alpha, max_output_len, batch_size, max_tokens, the text-level ones) every backend has.
OPTIONAL = ("n_best", "no_repeat_ngram", "repetition_penalty", "align", "prefix", "step")
OPTIONAL_DTYPES = ("bf16", "int8")  # the dtypes only some backends have (auto and fp32: every one)
NO_DTYPE = {("torch", "int8"): N_("{option}: the torch engine has no int8 (it was slower than CTranslate2's): use "
                                   "--engine ctranslate2 --dtype int8, or --dtype bf16"),
            ("ctranslate2", "bf16"): N_("{option}: CTranslate2 has no bf16 on CPU: use --dtype fp32 or --dtype int8")}
# A name of how the user gave the options (`named`): False: the API (`beam=0`); True: flags; the names of the flags
# given (the others came from decoding.json); or each name's own words (a serve request: '"beam": 4').
Naming = bool | frozenset | Mapping


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
        raise ConfigError(N_("{option}: the length penalty's exponent must be in [0, {most}] (0 = off; the paper "
                             "uses 0.6)"), option=named, most=MAX_ALPHA)


def check_repetition(no_repeat_ngram: int, repetition_penalty: float, names: tuple[str, str]) -> None:
    """One-line errors for a negative n-gram size and a penalty that is not a positive finite number."""
    if isinstance(no_repeat_ngram, bool) or not isinstance(no_repeat_ngram, numbers.Integral) or no_repeat_ngram < 0:
        raise ConfigError(N_("{option}: the n-gram size must be a whole number >= 0 (0 = off; fairseq users give 3)"),
                          option=names[0])
    if not (isinstance(repetition_penalty, numbers.Real) and math.isfinite(repetition_penalty)
            and MIN_PENALTY <= repetition_penalty <= 1 / MIN_PENALTY):
        raise ConfigError(N_("{option}: the penalty must be a positive number in [{low}, {high:g}] (1 = off, > 1 "
                             "discourages repeats; CTRL used 1.2)"), option=names[1], low=MIN_PENALTY,
                          high=1 / MIN_PENALTY)


def check_members(names: list, model_file: str) -> None:
    """A one-line ConfigError unless `names` are distinct safetensors file names (no folders: members live in the
    run folder, so a decoding.json cannot point outside it) other than `model_file`, the run's own weights."""
    for name in names:
        if not isinstance(name, str) or not MEMBER_FILE.fullmatch(name) or name == model_file:
            raise ConfigError(N_("ensemble member {name!r}: give the name of a .safetensors file in the run folder, "
                                 "without a folder, other than {model_file} (the first member)"), name=name,
                              model_file=model_file)
    if len(set(names)) < len(names):
        raise ConfigError(N_("ensemble {names}: a member is named twice"), names=names)


def search_bytes(config: ModelConfig, rows: int, steps: int) -> int:
    """Rough bytes a search of `rows` decoding rows (sentences x beams) over `steps` tokens holds at its peak: the
    self-attention KV cache (fp32, every decoder layer) and three (rows, V) score tensors per step."""
    kv = config.n_decoder_layers * steps * config.n_heads * (config.head_dim_k + config.head_dim_v) * 4
    return rows * (kv + 3 * config.tgt_vocab_size * 4 + steps * 8)



def upgrade(data: Mapping[str, Any]) -> dict[str, Any]:
    """An older decoding.json's keys under today's names: RENAMED (max_len -> max_output_len), and the retired
    `"int8": true` as dtype int8 (`false` said nothing: dropped). A key given under both names: one line."""
    data = dict(data)
    for old, new in RENAMED.items():
        if old in data:
            if new in data:
                raise ConfigError(N_("{old} and {new}: the same option under its old and new name; keep {new}"),
                                  old=old, new=new)
            data[new] = data.pop(old)
    if "int8" in data:
        int8 = data.pop("int8")
        if not isinstance(int8, bool):
            raise ConfigError(N_("int8={int8!r} must be true or false (today: \"dtype\": \"int8\")"), int8=int8)
        if int8 and data.get("dtype", "auto") not in ("auto", "int8"):
            raise ConfigError(N_("int8=true with dtype={dtype!r}: int8 is a dtype today; keep one"),
                              dtype=data["dtype"])
        if int8:
            data["dtype"] = "int8"
    return data


@dataclass(frozen=True)
class DecodingOptions:
    """Every decoding option (the module docstring says each); `pick` lays flags over them. Made = checked
    (`__post_init__`); `named_as` is how messages name the options (Naming above; not an option, never saved).
    The first five fields keep the order of the file's first version (positional construction still works)."""

    alpha: float = 0.6
    split_sentences: bool = False
    repair_copies: bool = False
    chosen: str = ""
    ensemble: list[str] = field(default_factory=list)
    engine: Engine = "torch"
    beam: int = 4
    max_output_len: int | None = None
    batch_size: int = 32
    max_tokens: int | None = None
    n_best: int = 1
    no_repeat_ngram: int = 0
    repetition_penalty: float = 1.0
    align: bool = False
    step: Step = "auto"
    dtype: Dtype = "auto"
    named_as: Naming = field(default=False, compare=False, repr=False, kw_only=True)

    def __post_init__(self) -> None:
        self.check()

    def pick(self, named_as: Naming | None = None, **flags: Any) -> DecodingOptions:
        """These options with each flag that was given (not None) in place of the run's value, checked;
        named_as: how messages name them from now on (default: as these are named)."""
        given = {k: v for k, v in flags.items() if v is not None}
        unknown = sorted(set(given) - set(OPTION_NAMES))
        if unknown:
            renamed: Any = ""
            for old in (old for old in unknown if old in RENAMED):
                renamed = Text(N_("{before}; {old} is {new} now"), before=renamed, old=old, new=RENAMED[old])
            raise ConfigError(N_("unknown decoding option(s) {unknown}{renamed}; the options: {options}"),
                              unknown=unknown, renamed=renamed, options=", ".join(OPTION_NAMES))
        return replace(self, **given, **({} if named_as is None else {"named_as": named_as}))

    def text_level(self) -> list[str]:
        """The pre- and post-processors turned on, by name (they run around any engine's search)."""
        return [name for name in ("split_sentences", "repair_copies") if getattr(self, name)]

    def options(self) -> dict[str, Any]:
        """What a result reports of how it was decoded: alpha and the text-level options (evaluate's JSON)."""
        return {"alpha": self.alpha, "split_sentences": self.split_sentences, "repair_copies": self.repair_copies}

    def changed(self) -> dict[str, Any]:
        """The options that differ from the defaults, by name (what an engine must support)."""
        return {name: getattr(self, name) for name in OPTION_NAMES
                if name != "chosen" and getattr(self, name) != DEFAULTS[name]}

    def to_dict(self) -> dict[str, Any]:
        """The options as decoding.json holds them."""
        return {k: v for k, v in asdict(self).items() if k != "named_as"}

    def name(self, option: str) -> str:
        """How a message names `option` with its value (`named`)."""
        return named(option, getattr(self, option), self.named_as)

    def check(self) -> None:
        """One-line ConfigErrors for options that cannot work on any model: types, choices, sizes < 1, a bad alpha,
        n_best outside [1, beam], bad repetition options. Run once for every DecodingOptions made (__post_init__)."""
        name = self.name
        check_field_types(type(self), {n: getattr(self, n) for n in OPTION_NAMES}, name)
        for option, hint in CHOICES.items():
            if getattr(self, option) not in literal_names(hint):
                raise ConfigError(N_("{option}: must be one of {choices}"), option=name(option),
                                  choices=", ".join(literal_names(hint)))
        for size in ("beam", "batch_size"):
            if getattr(self, size) < 1:
                raise ConfigError(N_("{option}: must be >= 1 (1 = greedy)") if size == "beam"
                                  else N_("{option}: must be >= 1"), option=name(size))
        for size in ("max_tokens", "max_output_len"):
            if getattr(self, size) is not None and getattr(self, size) < 1:
                raise ConfigError(N_("{option}: must be >= 1 (or left unset)"), option=name(size))
        if self.n_best < 1:
            raise ConfigError(N_("{option}: must be >= 1"), option=name("n_best"))
        if self.n_best > self.beam:
            raise ConfigError(N_("{option}: beam search keeps only {beam} hypotheses ({beam_option}); give a beam of "
                                 "at least {n_best}"), option=name("n_best"), beam=self.beam, beam_option=name("beam"),
                              n_best=self.n_best)
        check_repetition(self.no_repeat_ngram, self.repetition_penalty,
                         (name("no_repeat_ngram"), name("repetition_penalty")))
        check_alpha(self.alpha, name("alpha"))

    def check_for(self, config: ModelConfig | None, supports: Collection[str], members: int = 1) -> None:
        """The options against the model and the backend that decode them (engines/translator.py's Translator is
        the one caller): the model must translate; the backend must have every option set away from its default
        (SUPPORTS; dtype int8 / bf16 by those names); max_output_len within the positions, a beam no wider than the
        vocabulary, and the worst batch's search within this machine's memory (`members`: models decoded
        together, an ensemble, each with its own KV cache)."""
        arch = getattr(config, "arch", None)
        if config is None or arch != "encoder-decoder":
            hint = {"decoder": Message(N_(" (a language model continues text: use `scratchformer generate`)")),
                    "encoder": Message(N_(" (a classifier / masked LM: use `scratchformer evaluate`)"))}.get(arch, "")
            raise InputError(N_("translation needs an encoder-decoder model, got a {arch} one{hint}"),
                             arch=arch or Message(N_("model-less")), hint=hint)
        self.check_supported(supports)
        name, cap = self.name, config.max_positions
        if self.max_output_len is not None and self.max_output_len > cap:
            raise ConfigError(N_("{option}: the model's positions end at {cap}; give at most {cap} output tokens "
                                 "(unset: source length + {extra})"), option=name("max_output_len"), cap=cap,
                              extra=PAPER_EXTRA_LEN)
        if self.beam > config.tgt_vocab_size:
            raise ConfigError(N_("{option}: wider than the {size}-token target vocabulary; beams of 4-12 are usual"),
                              option=name("beam"), size=config.tgt_vocab_size)
        steps = output_budget(cap, self.max_output_len, cap)  # the longest source's budget
        need, have = members * search_bytes(config, self.batch_size * self.beam, steps), available_memory()
        if have is not None and need > have:
            raise ConfigError(N_("{beam} with {batch_size}: the search would need about {need}; this machine has "
                                 "{have} available: lower the beam or the batch size"), beam=name("beam"),
                              batch_size=name("batch_size"), need=human_bytes(need), have=human_bytes(have))

    def check_supported(self, supports: Collection[str], prefix: bool = False) -> None:
        """One line naming the engine for an option its backend does not have (set away from its default); a
        prefix (Translator.translate's) is such an option too."""
        if self.dtype in OPTIONAL_DTYPES and self.dtype not in supports:
            template = NO_DTYPE.get((self.engine, self.dtype), N_("{option}: the {engine} backend has no {dtype}"))
            raise ConfigError(template, option=self.name("dtype"), engine=self.engine, dtype=self.dtype)
        changed = {**self.changed(), **({"prefix": True} if prefix else {})}
        for option in OPTIONAL:
            if option in changed and option not in supports:
                shown = self.name(option) if option != "prefix" else "--prefix" if self.named_as else "prefix"
                raise ConfigError(N_("{option}: the {engine} backend does not have this option (--engine torch, our "
                                     "own decoder, has every option)"), option=shown, engine=self.engine)

    @classmethod
    def load(cls, path: str | Path, model_file: str) -> DecodingOptions:
        """decoding.json checked (`model_file`: the run's weights, which no ensemble member may name); a one-line
        ConfigError naming the file for anything wrong in it. Older files' keys are upgraded first (upgrade)."""
        data = read_json(path, "decoding config")
        try:
            data = upgrade(data) if isinstance(data, Mapping) else data
            reject_unknown_fields(cls, data, "decoding config field(s)")
            if "named_as" in data:
                raise ConfigError(N_("unknown {what} {unknown}; known fields: {known}"),
                                  what=Message(N_("decoding config field(s)")), unknown=["named_as"],
                                  known=", ".join(sorted(OPTION_NAMES)))
            options = cls(**{**data, **({"alpha": float(data["alpha"])} if "alpha" in data else {})})
            check_members(options.ensemble, model_file)
            return options
        except ConfigError as e:
            raise ConfigError(N_("decoding config {path}: {e}"), path=path, e=e) from None


OPTION_NAMES = tuple(f.name for f in fields(DecodingOptions) if f.name != "named_as")
DEFAULTS = {f.name: f.default_factory() if f.default is MISSING else f.default for f in fields(DecodingOptions)}
CHOICES = {"engine": Engine, "step": Step, "dtype": Dtype}


def named(name: str, value: object, cli: Naming) -> str:
    """How a message names an option: `--beam 7` for a flag, `--set alpha=1.5` for a --set key, `beam=7` for the
    API. `cli` may be the names of the flags the user gave: another option came from the run's decoding.json and is
    named so (`batch_size=100000 from decoding.json`), never as a flag the user did not type; or a mapping of each
    name to its own words (a serve request's), where a name it lacks is the server's (`beam=4 of this server`)."""
    if isinstance(cli, Mapping):
        return cli.get(name, f"{name}={value} of this server")
    if cli is False:
        return f"{name}={value}"
    if cli is not True and name not in cli:
        return f"{name}={value} from decoding.json"
    return flag_of(name, value)


# The options a command line sets with `--set KEY=VALUE` (config/decoding_flags.py's table makes the rest flags)
SET_KEYS = frozenset({"alpha", "max_output_len", "max_tokens", "no_repeat_ngram", "repetition_penalty",
                      "split_sentences", "repair_copies"})


def dash(name: str) -> str:
    """An option's flag spelling: max_output_len -> --max-output-len (config/decoding_flags.py's too)."""
    return "--" + name.replace("_", "-")


def flag_of(name: str, value: object) -> str:
    """How the command line gives option `name`: `--beam 4`, `--align`, `--set alpha=1.5`."""
    if name in SET_KEYS:
        return f"--set {name}={str(value).lower() if isinstance(value, bool) else value}"
    return dash(name) if isinstance(value, bool) else f"{dash(name)} {value}"

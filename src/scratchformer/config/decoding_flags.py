"""The decoding options on the command line of translate, evaluate, serve and report, made from one table (FLAGS):
the everyday ones are flags (`--engine --beam --batch-size --step --dtype`, translate's `--n-best --align`), every
other one a key of the repeatable `--set KEY=VALUE` (its value typed by the option's field). A flag that became a
key, or went away, is a retired flag: one line naming its replacement (`--alpha 1.0` -> `--alpha is gone: use
--set alpha=1.0`).

    add_decoding_args(group, "translate")    the flags, --set with its keys in --help, the retired flags
    given_flags(args)                        the options given (flags and --set), by name
    from_args(run_options, args)             the run's options with those laid over them, named as given
    set_values(args)                         every --set key by name (serve's limits too), typed
"""

from __future__ import annotations

import argparse
import typing
from collections.abc import Callable, Mapping
from dataclasses import dataclass
from typing import Any

from scratchformer.config.decoding import DEFAULTS, ENGINES, OPTION_NAMES, SET_KEYS, DecodingOptions, dash
from scratchformer.errors import ConfigError
from scratchformer.i18n import N_, _


@dataclass(frozen=True)
class Flag:
    """One decoding option on the command line; `commands` lists those that take it; `flag`: an everyday flag, else
    a `--set` key (config/decoding.py's SET_KEYS)."""

    name: str
    help: str
    commands: frozenset[str]
    metavar: str | None = None

    @property
    def flag(self) -> bool:
        return self.name not in SET_KEYS


ALL = frozenset({"translate", "evaluate", "serve", "report"})
TEXT = frozenset({"translate", "evaluate", "report"})  # serve: its max_batch_tokens is the batch budget
FLAGS: tuple[Flag, ...] = (
    Flag("engine", N_("decode with our PyTorch code or an exported copy (cached in the run directory)"), ALL,
         "ENGINE"),
    Flag("beam", N_("beam size (1 = greedy; the paper uses 4)"), ALL, "K"),
    Flag("batch_size", N_("most sentences decoded together"), ALL, "N"),
    Flag("n_best", N_("the N best hypotheses (N <= --beam), each as a line `text<TAB>score`"), frozenset({"translate"}),
         "N"),
    Flag("align", N_("add word alignments `i-j` (source-target subword indices, from the last decoder layer's "
         "cross-attention averaged over heads) after a TAB, or as \"alignment\" in jsonl"), frozenset({"translate"}),
         None),
    Flag("step", N_("torch's decoding step: eager, captured (compiled once with AOTInductor, cached in your cache "
         "folder; the first use says it compiles) or auto (a cached package; with none, translate --file compiles "
         "when the measured compile cost is below the time it saves, counting the tokens earlier files decoded "
         "eagerly, serve compiles in the background)"), ALL,
         "{auto,eager,captured}"),
    Flag("dtype", N_("what decodes in, as CTranslate2's compute_type: fp32, bf16 (torch; outputs may differ "
         "slightly), int8 (--engine ctranslate2) or auto (torch: bf16 where the CPU has AVX512-BF16 or AMX and it "
         "measured faster)"), ALL, "{auto,fp32,bf16,int8}"),
    Flag("alpha", N_("GNMT length penalty ((5+|Y|)/6)^alpha"), ALL, "A"),
    Flag("max_output_len", N_("most output tokens per sentence (unset: source length + 50, the paper's rule)"), ALL,
         "N"),
    Flag("max_tokens", N_("most padded source tokens (sentences x the longest) in one decoding batch (unset: no cap)"),
         TEXT, "N"),
    Flag("no_repeat_ngram", N_("never repeat an n-gram of N target tokens (fairseq's; 0 = off, 3 is usual)"), ALL, "N"),
    Flag("repetition_penalty", N_("divide the logits of tokens already output by P (CTRL's; 1 = off)"), ALL, "P"),
    Flag("split_sentences", N_("translate each line sentence by sentence (cut after . ! ? before a capital or digit, "
         "after 。！？) and join the parts"), ALL, "BOOL"),
    Flag("repair_copies", N_("put back names, numbers, paths and options the model miscopied from the source "
         "(outputs with CJK text only; decoding/copies.py)"), ALL, "BOOL"),
)
BY_NAME = {f.name: f for f in FLAGS}
RETIRED = {"--max-len": "--set max_output_len=N",
           "--int8": "--dtype int8 with --engine ctranslate2 (the torch engine has no int8: --dtype bf16)",
           "--no-int8": "--dtype fp32"}
TRUE, FALSE = ("true", "yes", "on", "1"), ("false", "no", "off", "0")
# A --set key beyond the decoding options (serve's limits): name -> (type, default, help)
Extra = Mapping[str, tuple[type, Any, str]]


def _shown(value: Any) -> str:
    return N_("unset") if value is None else N_("on") if value is True else N_("off") if value is False else str(value)


def set_keys(command: str, extra: Extra | None = None) -> dict[str, tuple[Any, Any, str]]:
    """The --set keys of `command`: name -> (type hint, default, help), the decoding options' then `extra`'s."""
    hints = typing.get_type_hints(DecodingOptions)
    keys = {f.name: (hints[f.name], DEFAULTS[f.name], f.help) for f in FLAGS
            if not f.flag and command in f.commands}
    return {**keys, **(extra or {})}


def add_decoding_args(group: Any, command: str, engines: Any = (), extra: Extra | None = None) -> None:
    """The decoding flags `command` takes, from FLAGS, and `--set KEY=VALUE` for the rest (`extra`: more keys,
    serve's limits): each defaults to None, which means the run's decoding.json (and the default above where the
    file says nothing), so --help shows that one default. Every flag that became a key is retired (one line naming
    it). `engines`: unused (the choices are config's Engine)."""
    def help_of(f_help: str, value: Any) -> str:
        return _("{help} (default: the run's decoding.json, else {value})").format(help=_(f_help),
                                                                                  value=_(_shown(value)))

    for f in FLAGS:
        if command not in f.commands or not f.flag:
            continue
        help = help_of(f.help, DEFAULTS[f.name])
        if f.metavar is None:
            group.add_argument(dash(f.name), action=argparse.BooleanOptionalAction, default=None, help=help)
        elif f.name == "engine":
            group.add_argument(dash(f.name), default=None, choices=ENGINES, metavar=f.metavar,
                               help=help.replace(" (default", ": %(choices)s (default", 1))
        else:
            kind = int if f.metavar in ("K", "N") else str
            group.add_argument(dash(f.name), type=kind, default=None, metavar=f.metavar, help=help)
    keys = set_keys(command, extra)
    listed = "; ".join(f"{name}: " + (help_of(help, value) if name in OPTION_NAMES else
                                      _("{help} (default {value})").format(help=_(help), value=value))
                       for name, (_hint, value, help) in keys.items())
    group.add_argument("--set", action="append", default=[], metavar="KEY=VALUE",
                       help=(_("set one more option (repeatable); the keys: {keys}").format(keys=listed))
                       .replace("%", "%%"))
    retired = {**(group.get_default("retired_flags") or {}), **RETIRED}
    for f in FLAGS:
        if not f.flag and command in f.commands:
            if f.metavar == "BOOL":
                retired[dash(f.name)] = f"--set {f.name}=true"
                retired["--no-" + dash(f.name)[2:]] = f"--set {f.name}=false"
            else:
                retired[dash(f.name)] = f"--set {f.name}={{value}}"  # the value given (cli/__init__.py)
    for name in extra or {}:
        retired[dash(name)] = f"--set {name}={{value}}"
    group.set_defaults(retired_flags=retired, decoding_command=command, set_extra=extra or {})


def _value(text: str, hint: Any) -> Any:
    """`text` as a value of the type `hint` (int, float, bool, optional int), or ValueError."""
    args = typing.get_args(hint)
    if type(None) in args:
        if text.strip().lower() in ("none", "unset", "null"):
            return None
        hint = next(a for a in args if a is not type(None))
    if hint is bool:
        if text.strip().lower() in TRUE + FALSE:
            return text.strip().lower() in TRUE
        raise ValueError(text)
    return hint(text) if hint in (int, float) else text


def _kind(hint: Any) -> str:
    args = typing.get_args(hint)
    if type(None) in args:
        return _kind(next(a for a in args if a is not type(None))) + _(" or none")
    return {int: _("a whole number"), float: _("a number"), bool: _("true or false")}.get(hint, _("a string"))


def parse_sets(items: list[str], command: str, extra: Extra | None = None) -> dict[str, Any]:
    """`--set KEY=VALUE` items by key, each value typed by its key; a one-line ConfigError listing the keys for an
    item without `=`, an unknown key or a value of the wrong type."""
    keys, out = set_keys(command, extra), {}
    for item in items:
        key, eq, text = item.partition("=")
        key = key.strip().replace("-", "_")
        if not eq or key not in keys:
            raise ConfigError(N_("--set {item}: give KEY=VALUE with one of the keys {keys}"), item=item,
                              keys=", ".join(keys))
        try:
            out[key] = _value(text, keys[key][0])
        except ValueError:
            raise ConfigError(N_("--set {item}: {key} takes {kind} (the keys: {keys})"), item=item, key=key,
                              kind=_kind(keys[key][0]), keys=", ".join(keys)) from None
    return out


def set_values(args: argparse.Namespace) -> dict[str, Any]:
    """Every `--set` key given to the command of `args`, by name, typed."""
    return parse_sets(getattr(args, "set", None) or [], getattr(args, "decoding_command", "translate"),
                      getattr(args, "set_extra", None))


def given_flags(args: argparse.Namespace | Mapping[str, Any]) -> dict[str, Any]:
    """The decoding options that were given (flags and --set keys; not None), by option name."""
    if isinstance(args, Mapping):
        return {k: v for k, v in args.items() if k in OPTION_NAMES and v is not None}
    get: Callable[[str], Any] = lambda name: getattr(args, name, None)  # noqa: E731
    flags = {f.name: get(f.name) for f in FLAGS if f.flag and get(f.name) is not None}
    return {**flags, **{k: v for k, v in set_values(args).items() if k in OPTION_NAMES and v is not None}}


def from_args(run_options: DecodingOptions, args: argparse.Namespace | Mapping[str, Any]) -> DecodingOptions:
    """The run's options with every decoding option that was given laid over them; messages name those as given
    (`--beam 0`, `--set alpha=-1`) and the others as decoding.json's."""
    given = given_flags(args)
    return run_options.pick(named_as=frozenset(given), **given)

"""Argument helpers shared by commands: presets with KEY=VALUE overrides, thread counts, and text input (arguments,
a file, or stdin) checked as UTF-8 line by line."""

from __future__ import annotations

import argparse
import codecs
import dataclasses
import os
import sys
import typing
from collections.abc import Iterable, Iterator
from typing import Any

from scratchformer.config import PRESETS, RENAMED_FIELDS, ModelConfig
from scratchformer.config.fields import loads_json
from scratchformer.errors import ConfigError, InputError
from scratchformer.i18n import N_, _, pad

_TRUE, _FALSE = ("true", "1", "yes", "on"), ("false", "0", "no", "off")


def parse_bool(text: str) -> bool:
    """'true'/'1'/'yes'/'on' -> True, 'false'/'0'/'no'/'off' -> False; anything else is a ValueError."""
    if text.lower() not in _TRUE + _FALSE:
        raise ConfigError("{text!r} is not a boolean (use true or false)", text=text)
    return text.lower() in _TRUE


def set_threads(threads: int | None) -> None:
    """`--threads N` of the commands that run a model: torch's CPU threads (None: torch's choice)."""
    if threads is None:
        return
    if threads < 1:
        raise ConfigError("--threads {threads}: give a number of CPU threads >= 1", threads=threads)
    most = max_threads()
    if threads > most:  # torch's thread pool crashes (segfaults) long before 100000 threads
        raise ConfigError(N_("--threads {threads}: more than {most} (4 x the {cpus} CPUs here); leave it unset for "
                             "torch's choice"), threads=threads, most=most, cpus=os.cpu_count() or 1)
    import torch

    torch.set_num_threads(threads)


def max_threads() -> int:
    """The most CPU threads a command accepts: 4 per CPU, enough for any oversubscription that helps."""
    return 4 * (os.cpu_count() or 1)


def check_utf8(text: str, where: str) -> str:
    """`text`, or a one-line InputError naming `where` when it holds a lone surrogate: the bytes of an argument that is
    not UTF-8 reach Python as such (U+DC80-U+DCFF), and JSON's "\\ud800" decodes to one; no tokenizer can take them.
    The one check of every text input that is not read as UTF-8 bytes (arguments, --input-format jsonl)."""
    try:
        text.encode("utf-8")
    except UnicodeEncodeError as e:
        code = ord(text[e.start])
        if 0xDC80 <= code <= 0xDCFF:  # a byte that is not UTF-8
            raise InputError("{where} is not valid UTF-8 (byte 0x{byte:02x}); convert it with iconv (e.g. iconv -f "
                             "latin1 -t utf-8)", where=where, byte=code - 0xDC00) from None
        raise InputError("{where} is not valid UTF-8 (a lone surrogate \\u{code:04x}): write the character itself or a "
                         "whole surrogate pair", where=where, code=code) from None
    return text


def check_text_args(texts: list[str]) -> list[str]:
    """`texts` (sentences or prompts given as arguments), or a one-line error for one that is not UTF-8."""
    for i, text in enumerate(texts, start=1):
        check_utf8(text, f"argument {i}")
    return texts


def read_lines(file: str) -> list[str]:
    """The lines of `file` ('-' for stdin) without line ends: UTF-8, a leading BOM dropped, invalid bytes one error
    naming the line ("stdin line 3 is not valid UTF-8: ..."). A pipe (`--file <(cmd)`) is read like a file."""
    from scratchformer.data.corpus import decode_lines

    if file == "-":
        if sys.stdin is None:  # the shell closed it (`0<&-`)
            raise InputError(N_("stdin is closed: give the text as arguments or with --file, or pipe it in"))
        stream = sys.stdin
        data = stream.buffer.read() if hasattr(stream, "buffer") else stream.read().encode("utf-8", "surrogateescape")
        return decode_lines(data, "stdin", InputError)
    try:
        with open(file, "rb") as f:
            data = f.read()
    except FileNotFoundError:
        raise InputError("--file {file} does not exist", file=file) from None
    except IsADirectoryError:
        raise InputError("--file {file} is a folder: give a text file, one sentence per line", file=file) from None
    return decode_lines(data, file, InputError)


def parse_value(key: str, text: str, cls: type = ModelConfig) -> Any:
    """'d_model=256' -> 256, 'norm_placement=pre' -> 'pre', 'd_k=none' -> None, using the declared type of the field
    `key` of the dataclass `cls` (ModelConfig, TrainConfig)."""
    hints = typing.get_type_hints(cls)
    if key not in hints:
        fields = ", ".join(f.name for f in dataclasses.fields(cls))
        raise ConfigError("unknown config field {key!r}; fields: {fields}", key=key, fields=fields)
    hint = hints[key]
    args = typing.get_args(hint) if typing.get_origin(hint) is not typing.Literal else ()
    if text.lower() in ("none", "null") and type(None) in args:
        return None
    base = next((a for a in args if a is not type(None)), hint) if args else hint
    if typing.get_origin(base) is typing.Literal:  # norm_placement=pre: a name of a choice, checked by ModelConfig
        base = type(typing.get_args(base)[0])
    try:
        if base is bool:
            return parse_bool(text)
        if base in (int, float, str):
            return base(text)
        return loads_json(text)  # nesting bounded: a deep value is one line, not a RecursionError
    except ValueError:
        raise ConfigError("cannot read {key}={text!r} as {type}", key=key, text=text,
                          type=getattr(base, "__name__", base)) from None


def _key_value(item: str) -> tuple[str, str]:
    if "=" not in item:
        raise ConfigError("override {item!r} is not KEY=VALUE (for example d_model=256 or norm_placement=pre)",
                          item=item)
    key, value = item.split("=", 1)
    return key.strip().replace("-", "_"), value.strip()


def parse_overrides(items: list[str]) -> dict[str, Any]:
    """KEY=VALUE model-config overrides (`params`, `shapes`): {field: typed value}."""
    out = {}
    for item in items:
        key, value = _key_value(item)
        key = RENAMED_FIELDS.get(key, key)  # norm=pre, max_len=64 still work: the old names
        out[key] = parse_value(key, value)
    return out


# TrainConfig's fields that `train`'s KEY=VALUE can set: every one but the model overrides (the model's own fields are
# keys themselves). The two vocabulary sizes are fields of both: they are the tokenizers' (TrainConfig), which the
# model's follow.
def train_keys() -> list[str]:
    from scratchformer.config import TrainConfig

    return [f.name for f in dataclasses.fields(TrainConfig) if f.name != "model"]


def parse_train_settings(items: list[str]) -> tuple[dict[str, Any], dict[str, Any]]:
    """`train`'s KEY=VALUE arguments: (TrainConfig fields, ModelConfig overrides), each value typed by its field. A
    key is looked up in TrainConfig, then ModelConfig (their old names too); unknown is one line listing both."""
    from scratchformer.config import TrainConfig
    from scratchformer.config.train import RENAMED_TRAIN_FIELDS

    train, model = {}, {}
    model_keys = [f.name for f in dataclasses.fields(ModelConfig)]
    for item in items:
        key, value = _key_value(item)
        if key in RENAMED_TRAIN_FIELDS and key in RENAMED_FIELDS:  # max_len: the sentence cut or the positions
            raise ConfigError("{key}= is gone: use {train}= (longest training sentence) or {model}= (the model's "
                              "positions)", key=key, train=RENAMED_TRAIN_FIELDS[key], model=RENAMED_FIELDS[key])
        if key in train_keys():
            train[key] = parse_value(key, value, TrainConfig)
        elif RENAMED_FIELDS.get(key, key) in model_keys:
            key = RENAMED_FIELDS.get(key, key)
            model[key] = parse_value(key, value)
        else:
            raise ConfigError("unknown KEY {key!r}: training keys: {train}; model keys: {model}", key=key,
                              train=", ".join(train_keys()), model=", ".join(model_keys))
    return train, model


@dataclasses.dataclass(frozen=True)
class SetKey:
    """One key of a command's repeatable `--set KEY=VALUE`: how its text is read, its default, its help (in the
    catalog: give it as N_())."""

    name: str
    parse: Any
    default: Any
    help: str


def add_set_arg(p: argparse.ArgumentParser, keys: list[SetKey], were_flags: bool = True) -> None:
    """`--set KEY=VALUE` (repeatable) on `p` for the settings `keys`, each one an attribute of the parsed arguments
    (its default until apply_sets reads --set); `--help` lists them with their meaning and default. `were_flags`:
    each key was a flag before (`--top-k`), now retired: it fails with one line naming `--set top_k=VALUE`."""
    p.add_argument("--set", dest="sets", action="append", default=[], metavar="KEY=VALUE",
                   help=_("a setting, repeatable (the keys are listed below), e.g. --set {example}").format(
                       example=f"{keys[0].name}={shown(keys[0].default)}"))
    p.set_defaults(set_keys=keys, **{k.name: k.default for k in keys})
    if were_flags:
        retired = {f"--{k.name.replace('_', '-')}": f"--set {k.name}={{value}}" for k in keys}
        p.set_defaults(retired_flags={**(p.get_default("retired_flags") or {}), **retired})
    rows = [(k.name, _("{text} ({default})").format(text=_(k.help), default=_("default: {value}").format(
        value=shown(k.default)))) for k in keys]
    p.epilog = "\n".join([_("keys of --set KEY=VALUE:"), *key_table(rows)]) + "\n"
    p.formatter_class = argparse.RawDescriptionHelpFormatter


def key_table(rows: list[tuple[str, str]], columns: int = 100) -> list[str]:
    """`KEY=  what it means (default: ...)` lines of a command's --help, one key a row, the text wrapped."""
    import textwrap

    width = max(len(name) for name, _text in rows) + 4
    lines = []
    for name, text in rows:
        wrapped = textwrap.wrap(text.replace("%%", "%"), columns - width) or [""]
        lines += [f"  {pad(name + '=', width - 2)}{wrapped[0]}", *(" " * width + more for more in wrapped[1:])]
    return lines


def apply_sets(args: argparse.Namespace) -> None:
    """Each `--set KEY=VALUE` of args onto args.KEY, typed by its key; a one-line ConfigError for an unknown key or a
    value its key cannot read."""
    keys = {k.name: k for k in getattr(args, "set_keys", [])}
    for item in getattr(args, "sets", None) or []:
        key, value = _key_value(item)
        if key not in keys:
            raise ConfigError("--set {key}: unknown key; keys: {keys}", key=key, keys=", ".join(keys))
        try:
            setattr(args, key, keys[key].parse(value))
        except ValueError:
            raise ConfigError("--set {key}={value}: cannot read it as {type}", key=key, value=value,
                              type=getattr(keys[key].parse, "__name__", "a value")) from None


def shown(value: Any) -> str:
    """A default as one types it: none, true, false, 1000."""
    return "none" if value is None else str(value).lower() if isinstance(value, bool) else str(value)


class LazyChoices:
    """A flag's choices read from a registry only when the flag is given or help is shown: --engine's ENGINES
    (engines/backends.py), --format's FORMATS (export/formats.py). Late: those modules import torch, which
    building the parser (`--help`, `--version`) must not."""

    def __init__(self, module: str, table: str) -> None:
        self.module, self.table = module, table

    def _names(self) -> list[str]:
        import importlib

        return list(getattr(importlib.import_module(self.module), self.table))

    def __contains__(self, name: object) -> bool:
        return name in self._names()

    def __iter__(self):
        return iter(self._names())


def add_decoding_args(group: Any, command: str) -> None:
    """The decoding flags of `command` (translate, evaluate, serve, report), made from config/decoding.py's FLAGS:
    each defaults to the run's decoding.json, else to DecodingOptions' default."""
    from scratchformer.config.decoding import add_decoding_args as add  # its help texts are in the catalog

    add(group, command, LazyChoices("scratchformer.engines.backends", "ENGINES"))


def iter_lines(file: str) -> Iterator[str]:
    """The lines of `file` ('-' for stdin) one at a time, without line ends: what read_lines gives, never holding
    the whole file (translate --file streams). Invalid UTF-8 is one InputError naming the line."""
    if file == "-":
        if sys.stdin is None:
            raise InputError(N_("stdin is closed: give the text as arguments or with --file, or pipe it in"))
        yield from _decoded(getattr(sys.stdin, "buffer", None) or _encoded(sys.stdin), "stdin")
        return
    try:
        f = open(file, "rb")
    except FileNotFoundError:
        raise InputError("--file {file} does not exist", file=file) from None
    except IsADirectoryError:
        raise InputError("--file {file} is a folder: give a text file, one sentence per line", file=file) from None
    with f:
        yield from _decoded(f, file)


def _encoded(stream: Any) -> Iterator[bytes]:
    for line in stream:
        yield line.encode("utf-8", "surrogateescape")


def _decoded(lines: Iterable[bytes], name: str) -> Iterator[str]:
    for n, raw in enumerate(lines, start=1):
        if n == 1 and raw.startswith(codecs.BOM_UTF8):
            raw = raw[len(codecs.BOM_UTF8):]
        try:
            text = raw.decode("utf-8")
        except UnicodeDecodeError as e:
            raise InputError(N_("{name} line {n} is not valid UTF-8: {reason} at byte 0x{byte:02x}; convert it with "
                                "iconv (e.g. iconv -f latin1 -t utf-8)"), name=name, n=n, reason=e.reason,
                             byte=raw[e.start]) from None
        yield text.rstrip("\n").rstrip("\r") if text.endswith("\n") else text.rstrip("\r")


def sample_lines(sample: dict[str, Any]) -> str:
    """A sample translation as three indented lines: source, reference, hypothesis (train's test report, evaluate)."""
    return _("  src: {src}\n  ref: {ref}\n  hyp: {hyp}").format(src=sample["src"], ref=sample["ref"], hyp=sample["hyp"])


def add_model_args(p: argparse.ArgumentParser, default_preset: str = "paper-base") -> None:
    p.add_argument("--preset", default=default_preset, help=_("one of: {presets}").format(presets=", ".join(PRESETS)))
    p.add_argument("overrides", nargs="*", metavar="KEY=VALUE",
                   help="config overrides, e.g. d_model=256 norm_placement=pre")


def config_from_args(args: argparse.Namespace) -> ModelConfig:
    return ModelConfig.preset(args.preset, **parse_overrides(args.overrides))

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
from scratchformer.i18n import N_, _

_TYPES = typing.get_type_hints(ModelConfig)


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
        raise ConfigError(f"--threads {threads}: more than {most} (4 x the {os.cpu_count() or 1} CPUs here); "
                          "leave it unset for torch's choice")
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


def parse_value(key: str, text: str) -> Any:
    """'d_model=256' -> 256, 'norm_placement=pre' -> 'pre', 'd_k=none' -> None, using the field's declared type."""
    if key not in _TYPES:
        fields = ", ".join(f.name for f in dataclasses.fields(ModelConfig))
        raise ConfigError("unknown config field {key!r}; fields: {fields}", key=key, fields=fields)
    hint = _TYPES[key]
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


def parse_overrides(items: list[str]) -> dict[str, Any]:
    out = {}
    for item in items:
        if "=" not in item:
            raise ConfigError("override {item!r} is not KEY=VALUE (for example d_model=256 or norm_placement=pre)",
                              item=item)
        key, value = item.split("=", 1)
        key = key.strip().replace("-", "_")
        key = RENAMED_FIELDS.get(key, key)  # norm=pre still works: the old name of norm_placement
        out[key] = parse_value(key, value.strip())
    return out


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
            raise InputError(f"{name} line {n} is not valid UTF-8: {e.reason} at byte 0x{raw[e.start]:02x}; convert "
                             "it with iconv (e.g. iconv -f latin1 -t utf-8)") from None
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

"""The generic checks of a config dataclass: its fields' types and choices, unknown keys, and JSON files.

    reject_unknown_fields(cls, data, what)   a mapping's keys are fields of `cls` and its values fit their types
    check_field_types(cls, data)             each value fits its field's type hint (what a JSON file can get wrong)
    check_choices(obj)                       each `Literal[...]`-typed field holds one of its names
    literal_names(hint)                      Literal["post", "pre"] -> ("post", "pre"): a choice is written once
    regular_file(path) / read_json(path)     a file checked before it is read, and its JSON object
    loads_json(text)                         json.loads with its nesting bounded (every JSON a user can hand us)
"""

from __future__ import annotations

import dataclasses
import json
import re
import stat
import types
import typing
from collections.abc import Callable, Mapping
from pathlib import Path
from typing import Any

from scratchformer.errors import N_, ConfigError, Message, ScratchformerError


def reject_unknown_fields(cls: type, data: Mapping[str, Any], what: str,
                          label: Callable[[str], str] = str) -> None:
    """A one-line ConfigError if `data` is not a mapping, names keys that are not fields of the dataclass `cls`,
    or holds a value whose type does not fit its field's type hint (what a JSON file can get wrong)."""
    if not isinstance(data, Mapping):
        raise ConfigError(N_("{what} must be a JSON object of field: value pairs, got {name}"), what=Message(what),
                          name=type(data).__name__)
    known = {f.name for f in dataclasses.fields(cls)}
    unknown = {str(k) for k in data} - known
    if unknown:
        raise ConfigError(N_("unknown {what} {unknown}; known fields: {known}"), what=Message(what),
                          unknown=sorted(unknown), known=', '.join(sorted(known)))
    check_field_types(cls, data, label)


# -- types of dataclass fields (JSON files can hold anything) ------------------------------------------------------
_HINTS: dict[type, dict[str, Any]] = {}


def _field_hints(cls: type) -> dict[str, Any]:
    if cls not in _HINTS:
        _HINTS[cls] = typing.get_type_hints(cls)
    return _HINTS[cls]


def _is_union(hint: Any) -> bool:
    return typing.get_origin(hint) in (typing.Union, types.UnionType)


def _value_type(hint: Any) -> Any:
    """A Literal stands for the type of its names (Literal["post", "pre"] -> str); any other hint for itself."""
    if typing.get_origin(hint) is typing.Literal:
        return type(typing.get_args(hint)[0])
    return hint


def literal_names(hint: Any) -> tuple[Any, ...]:
    """The names a Literal (or an optional Literal) allows, in order; () for any other hint."""
    if _is_union(hint):
        return tuple(name for a in typing.get_args(hint) for name in literal_names(a))
    return typing.get_args(hint) if typing.get_origin(hint) is typing.Literal else ()


def _fits(value: Any, hint: Any) -> bool:
    """Whether `value` fits the type hint: bool is not an int, an int is a float, containers by their outer type,
    a Literal by the type of its names (which name: check_choices)."""
    if _is_union(hint):
        return any(_fits(value, a) for a in typing.get_args(hint))
    hint = _value_type(hint)
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
    kind = typing.get_origin(hint) or hint
    return isinstance(value, kind) if isinstance(kind, type) else True


def _type_name(hint: Any) -> str:
    """The Python name of a type hint: "int", "int or None", "dict"."""
    if _is_union(hint):
        return " or ".join(_type_name(a) for a in typing.get_args(hint))
    hint = _value_type(hint)
    if hint is type(None):
        return "None"
    kind = typing.get_origin(hint) or hint
    return getattr(kind, "__name__", str(kind))


def _json_words(hint: Any) -> str:
    """What a JSON file must hold for that hint: "an integer or null", "true or false", "a JSON object"."""
    if _is_union(hint):
        return " or ".join(_json_words(a) for a in typing.get_args(hint))
    hint = _value_type(hint)
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
            raise ConfigError(N_("{label}={shown} must be {type_name} ({json_words}), got {name}"), label=label(name),
                              shown=shown, type_name=_type_name(hints[name]), json_words=_json_words(hints[name]),
                              name=type(value).__name__)


def check_choices(obj: Any) -> None:
    """A one-line ConfigError naming the first `Literal[...]` field of the dataclass `obj` that holds another name
    ("norm='mid' is not one of post, pre"); None passes where the field is optional."""
    for name, hint in _field_hints(type(obj)).items():
        names, value = literal_names(hint), getattr(obj, name)
        if names and value not in names and not (value is None and _fits(None, hint)):
            raise ConfigError("{name}={value!r} is not one of {names}", name=name, value=value,
                              names=", ".join(map(str, names)))


# -- files --------------------------------------------------------------------------------------------------------
def regular_file(path: str | Path, error: type[ScratchformerError] = ConfigError) -> Path:
    """`path`, checked before it is opened: a FIFO would block the read for ever, a folder or a device fails later
    with a worse message. A missing path passes (each caller words that case itself)."""
    path = Path(path)
    try:
        mode = path.stat().st_mode
    except FileNotFoundError:
        return path
    except OSError as e:
        raise error(N_("{path}: cannot read it: {reason}"), path=path, reason=e.strerror) from None
    if not stat.S_ISREG(mode):
        kind = N_("a folder") if stat.S_ISDIR(mode) else N_("a FIFO") if stat.S_ISFIFO(mode) else \
            N_("a device or socket")
        raise error(N_("{path} is not a regular file (it is {kind})"), path=path, kind=Message(kind))
    return path


# -- JSON nested too deeply --------------------------------------------------------------------------------------
MAX_JSON_DEPTH = 100  # levels of [ and {: our files use under 10, Hugging Face's tokenizer.json under 10
_NOT_BRACKET = bytes(b for b in range(256) if b not in b"[]{}")
_TOKEN = re.compile(r'"[^"\\]*(?:\\.[^"\\]*)*"|[\[{]|[\]}]')  # a string (skipped), an opening, a closing


def _too_deep(text: str, limit: int) -> int | None:
    """The offset of the first [ or { nested deeper than `limit` outside strings, else None. A fast pass first
    (C-level string operations: strings cut out, brackets kept, the innermost pairs removed once per level); the
    exact scan only when that pass finds more levels (or brackets it cannot pair: invalid JSON)."""
    if text.count("[") + text.count("{") <= limit:
        return None
    outside = "".join(text.replace("\\\\", "").replace('\\"', "").split('"')[::2])  # escapes, then strings
    brackets = outside.encode("utf-8", "surrogatepass").translate(None, _NOT_BRACKET)
    brackets = brackets.replace(b"{", b"[").replace(b"}", b"]")
    for _ in range(limit + 1):
        if not brackets:
            return None
        inner = brackets.replace(b"[]", b"")
        if inner == brackets:
            break  # unpaired brackets: the exact scan decides, json.loads names the syntax error
        brackets = inner
    depth = 0
    for token in _TOKEN.finditer(text):
        kind = token.group()[0]
        if kind in "[{":
            depth += 1
            if depth > limit:
                return token.start()
        elif kind in "]}":
            depth -= 1
    return None


def loads_json(text: str, limit: int = MAX_JSON_DEPTH) -> Any:
    """json.loads(text), but a document nested deeper than `limit` levels is a json.JSONDecodeError (a ValueError)
    instead of a RecursionError, and so is an integer too long for int() (4300 digits): every caller's own except
    clause then names its file in one line."""
    pos = _too_deep(text, limit)
    if pos is not None:
        raise json.JSONDecodeError(f"nested deeper than {limit} levels of [ and {{", text, pos)
    try:
        return json.loads(text)
    except RecursionError:  # the scan above keeps this from happening; a second guard costs nothing
        raise json.JSONDecodeError(f"nested deeper than {limit} levels of [ and {{", text, 0) from None
    except json.JSONDecodeError:
        raise
    except ValueError as e:  # an integer of more than 4300 digits: Python's int() limit, not a JSONDecodeError
        raise json.JSONDecodeError(f"a number too long to read ({str(e).split(';')[0]})", text, 0) from None


def read_json(path: str | Path, what: str) -> dict[str, Any]:
    """A JSON file's object, or a one-line ConfigError naming `what` and the file. A UTF-8 BOM is allowed."""
    path = regular_file(path)
    try:
        data = loads_json(path.read_text(encoding="utf-8-sig"))
    except FileNotFoundError:
        raise ConfigError(N_("{what} {path} does not exist"), what=Message(what), path=path) from None
    except UnicodeDecodeError as e:
        raise ConfigError(N_("{what} {path} is not UTF-8 text: {reason} at byte {start}"), what=Message(what),
                          path=path, reason=e.reason, start=e.start) from None
    except json.JSONDecodeError as e:
        raise ConfigError(N_("{what} {path} is not valid JSON: {e}"), what=Message(what), path=path, e=e) from None
    if not isinstance(data, dict):
        raise ConfigError(N_("{what} {path} must hold a JSON object, got {name}"), what=Message(what), path=path,
                          name=type(data).__name__)
    return data


def renamed_fields(data: Any, renamed: Mapping[str, str]) -> Any:
    """A mapping with each old name of `renamed` (old -> new) replaced by its new one: the one rule by which older
    config.json, train_config.json and decoding.json files load. A field given under both names with different
    values is a one-line ConfigError; anything not a dict is returned as it is (its reader says what is wrong)."""
    if not isinstance(data, dict) or not any(old in data for old in renamed):
        return data
    out = dict(data)
    for old, new in renamed.items():
        if old in out:
            value = out.pop(old)
            if new in out and out[new] != value:
                raise ConfigError(N_("{old}={value!r} (the old name of {new}) disagrees with {new}={given!r}"),
                                  old=old, value=value, new=new, given=out[new])
            out[new] = value
    return out

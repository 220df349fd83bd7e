"""A model's chat template (Jinja), rendered as transformers renders it, in a sandbox with bounds.

    text = render_chat(template, messages, add_generation_prompt=True, bos_token="<s>", eos_token="</s>")
    template = pick_template(settings["chat_template"], "tokenizer_config.json")   # a str, or HF's named list

transformers' globals are there (`raise_exception`, `strftime_now`, a `tojson` that keeps non-ASCII text, `{% break %}`
and `{% continue %}`). A template comes with the model file, so it is not trusted: jinja2's immutable sandbox refuses
attribute tricks, and the bounds below keep a hostile one from hanging start-up or eating memory (nested
`range(100000)` loops, a string doubled in a loop). Every failure is one ConfigError naming the template's source.
"""

from __future__ import annotations

import json
import signal
import threading
import time
from collections.abc import Sized
from datetime import datetime
from typing import Any

from scratchformer.errors import N_, ConfigError, Localizable

MAX_RANGE = 10_000  # range(n) in a template (transformers' templates loop over messages and tools: tens)
MAX_CHARS = 1_000_000  # the rendered prompt, and any one string or list a template builds
MAX_BITS = 100_000  # a whole number `*` or `**` makes
RENDER_SECONDS = 10.0  # a real template renders in milliseconds


class _TemplateLimit(Localizable, Exception):
    """A bound of the rendering crossed (raised inside jinja2, turned into a ConfigError by render_chat, whose
    message holds it as a field: translated with it)."""

    def __init__(self, message: str, **fields: Any) -> None:
        super().__init__(self._keep(message, fields))


def pick_template(value: Any, source: str) -> str | None:
    """The template text of a `chat_template` setting: a string, or Hugging Face's named templates (a list of
    {"name", "template"} or a {name: template} dict), of which "default" is the chat template."""
    if value is None or isinstance(value, str):
        return value
    named = value
    if isinstance(value, list):
        if not all(isinstance(v, dict) and isinstance(v.get("name"), str) for v in value):
            raise ConfigError(N_("{source}: chat_template is a list, but not of {{\"name\", \"template\"}} objects"),
                              source=source)
        named = {v["name"]: v.get("template") for v in value}
    if not isinstance(named, dict):
        raise ConfigError(N_("{source}: chat_template must be a string or named templates, got {name}"), source=source,
                          name=type(value).__name__)
    if not isinstance(named.get("default"), str):
        raise ConfigError(N_("{source}: chat_template names the templates {map} but no 'default' one (the chat "
                             "template)"), source=source, map=sorted(map(str, named))[:8])
    return named["default"]


def _environment(deadline: float):
    """transformers' ImmutableSandboxedEnvironment with its globals and filters, every call, attribute, item and
    `*` / `**` checked against the deadline and the size bounds."""
    from jinja2.ext import loopcontrols  # jinja2 is installed with torch
    from jinja2.sandbox import ImmutableSandboxedEnvironment

    def check(value: Any) -> Any:
        if time.monotonic() > deadline:
            raise _TemplateLimit(N_("it ran longer than {RENDER_SECONDS:g} s"), RENDER_SECONDS=RENDER_SECONDS)
        if isinstance(value, (str, bytes, list, tuple, dict)) and len(value) > MAX_CHARS:
            raise _TemplateLimit(N_("it built a value of {n_value:,} items or characters (the limit is "
                                    "{MAX_CHARS:,})"), n_value=len(value), MAX_CHARS=MAX_CHARS)
        return value

    class Bounded(ImmutableSandboxedEnvironment):
        intercepted_binops = frozenset(["*", "**"])

        def call(__self, __context, __obj, *args, **kwargs):  # noqa: N805 (jinja2's own spelling)
            check(None)
            return check(super().call(__context, __obj, *args, **kwargs))

        def getattr(self, obj, attribute):
            return check(super().getattr(obj, attribute))

        def getitem(self, obj, argument):
            return check(super().getitem(obj, argument))

        def call_binop(self, context, operator, left, right):
            check(None)
            if all(isinstance(v, int) for v in (left, right)):  # whole numbers grow without bound: squared in a loop
                bits = abs(left).bit_length() * right if operator == "**" else left.bit_length() + right.bit_length()
                if bits > MAX_BITS:
                    raise _TemplateLimit(N_("it made a number of about {bits:,} bits (the limit is {MAX_BITS:,})"),
                                         bits=bits, MAX_BITS=MAX_BITS)
            elif operator == "*" and isinstance(left, Sized) != isinstance(right, Sized):
                sized, times = (left, right) if isinstance(left, Sized) else (right, left)
                if isinstance(times, int) and len(sized) * times > MAX_CHARS:
                    raise _TemplateLimit(N_("it repeated a value {times:,} times (the limit is {MAX_CHARS:,} items)"),
                                         times=times, MAX_CHARS=MAX_CHARS)
            return super().call_binop(context, operator, left, right)

    def bounded_range(*args: int) -> range:
        r = range(*args)
        if len(r) > MAX_RANGE:
            raise _TemplateLimit(N_("range of {n_r:,} numbers (the limit is {MAX_RANGE:,})"), n_r=len(r),
                                 MAX_RANGE=MAX_RANGE)
        return r

    def raise_exception(message: Any) -> None:
        from jinja2.exceptions import TemplateError

        raise TemplateError(str(message))

    def tojson(x: Any, ensure_ascii: bool = False, indent: int | None = None, separators: Any = None,
               sort_keys: bool = False) -> str:
        return json.dumps(x, ensure_ascii=ensure_ascii, indent=indent, separators=separators, sort_keys=sort_keys)

    env = Bounded(trim_blocks=True, lstrip_blocks=True, extensions=[loopcontrols])
    env.filters["tojson"] = tojson
    env.globals.update(range=bounded_range, raise_exception=raise_exception,
                       strftime_now=lambda fmt: datetime.now().strftime(fmt))
    return env


class _Alarm:
    """A loop with no call, attribute or output in it escapes every hook above: on the main thread a timer
    interrupts it (a signal handler runs between bytecodes of the compiled template). Elsewhere: the hooks only."""

    def __init__(self, seconds: float) -> None:
        self.seconds, self.armed = seconds, False

    def __enter__(self) -> _Alarm:
        usable = threading.current_thread() is threading.main_thread() and hasattr(signal, "setitimer")
        if usable and signal.getitimer(signal.ITIMER_REAL)[0] == 0:  # never take over a timer someone else set
            self.previous = signal.signal(signal.SIGALRM, self._ring)
            signal.setitimer(signal.ITIMER_REAL, self.seconds)
            self.armed = True
        return self

    def _ring(self, signum: int, frame: Any) -> None:
        raise _TemplateLimit(N_("it ran longer than {RENDER_SECONDS:g} s"), RENDER_SECONDS=RENDER_SECONDS)

    def __exit__(self, *exc: Any) -> None:
        if self.armed:
            signal.setitimer(signal.ITIMER_REAL, 0)
            signal.signal(signal.SIGALRM, self.previous)


def render_chat(template: str, messages: list[dict[str, Any]], source: str = "the model",
                **variables: Any) -> str:
    """The prompt text of a conversation by `template`, or a one-line ConfigError naming `source` and why
    (a syntax error, `raise_exception` in the template, a sandbox refusal, a bound crossed)."""
    from jinja2.exceptions import TemplateError, TemplateSyntaxError

    deadline = time.monotonic() + RENDER_SECONDS
    try:
        with _Alarm(RENDER_SECONDS):
            compiled = _environment(deadline).from_string(template)
            parts, size = [], 0
            for part in compiled.generate(messages=messages, **variables):
                size += len(part)
                if size > MAX_CHARS or time.monotonic() > deadline:
                    if size > MAX_CHARS:
                        raise _TemplateLimit(N_("its output passed {limit:,} characters"), limit=MAX_CHARS)
                    raise _TemplateLimit(N_("it ran longer than {seconds:g} s"), seconds=RENDER_SECONDS)
                parts.append(part)
    except TemplateSyntaxError as e:
        raise ConfigError(N_("the chat template of {source} is not valid Jinja: {message_} (line {lineno})"),
                          source=source, message_=e.message, lineno=e.lineno) from None
    except _TemplateLimit as e:
        raise ConfigError(N_("the chat template of {source} was stopped: {e}"), source=source, e=e) from None
    except TemplateError as e:  # raise_exception(...), an undefined name, a refusal of the sandbox
        message = str(e).splitlines()[0] if str(e) else type(e).__name__
        raise ConfigError(N_("the chat template of {source} refused: {message_}"), source=source,
                          message_=message[:300]) from None
    except (TypeError, ValueError, ArithmeticError, LookupError, AttributeError, RecursionError) as e:
        message = str(e).splitlines()[0] if str(e) else ""
        raise ConfigError(N_("the chat template of {source} failed: {name}: {message_}"), source=source,
                          name=type(e).__name__, message_=message[:300]) from None
    return "".join(parts)

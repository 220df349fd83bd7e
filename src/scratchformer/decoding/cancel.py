"""Stopping a decoding that nobody waits for any more: a cancellation token the caller sets around its call, and
one `check()` per step inside the decoders' loops (greedy.py, beam.py), so no signature has to carry it.

    token = Token(deadline=time.monotonic() + 60)
    with token.scope():                 # on the thread that decodes
        translator.translate(...)       # raises Cancelled at the next step once token.cancel() or the deadline
    token.cancel()                      # from any thread: the service when its client gave up or at shutdown

Without a scope (the CLI, the tests, any library caller) check() costs one context-variable read and never
raises. The token lives in a ContextVar: each thread (and each asyncio task) sees only the scope it set itself.
"""

from __future__ import annotations

import contextlib
import threading
import time
from collections.abc import Iterator
from contextvars import ContextVar


class Cancelled(Exception):  # noqa: N818 (not an error of the input: the caller stopped the work)
    """The decoding was cancelled by its caller (its client gave up, its deadline passed, or a shutdown).
    Not a ValueError on purpose: nobody may mistake it for bad input and answer it as one."""


class Token:
    """Set once, read by the decoding thread at every step: cancel() from anywhere, or a monotonic deadline."""

    def __init__(self, deadline: float | None = None) -> None:
        self.deadline = deadline  # time.monotonic() after which the work stops by itself; None: never
        self._event = threading.Event()
        self.reason = ""

    def cancel(self, reason: str = "cancelled") -> None:
        if not self._event.is_set():
            self.reason = reason
            self._event.set()

    @property
    def cancelled(self) -> bool:
        if self._event.is_set():
            return True
        if self.deadline is not None and time.monotonic() > self.deadline:
            self.cancel("its deadline passed")
            return True
        return False

    @contextlib.contextmanager
    def scope(self) -> Iterator[Token]:
        """Make this the token that check() reads in the current thread / task, for the `with` block."""
        reset = _current.set(self)
        try:
            yield self
        finally:
            _current.reset(reset)


_current: ContextVar[Token | None] = ContextVar("scratchformer_cancel_token", default=None)


def check() -> None:
    """Raise Cancelled if the current scope's token was cancelled; called once per decoding step."""
    token = _current.get()
    if token is not None and token.cancelled:
        raise Cancelled(f"decoding stopped: {token.reason}")

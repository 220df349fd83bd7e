"""The connection side of the service: uvicorn's h11 protocol with the limits uvicorn lacks (issue 42, findings 8
and 9). uvicorn 0.3x-0.5x offers `timeout_keep_alive` (armed only once a response is complete, and cancelled by
any byte, so a client that trickles headers keeps it off), `limit_concurrency` (a text/plain 503, and only once
a request's headers are in: an idle connection still holds its descriptor forever) and h11's header size limit;
no header or body timeout. So, per connection:

- the request line and headers must be in within `header_timeout` seconds of the connection (or of the previous
  answer): else it is closed (idle or slow-header clients);
- once the headers are in, the body must be in within `body_timeout`: the app answers 408 at that deadline while
  it reads the body (bodies.read_body), and this closes the connection a second later if nobody did (a route
  that never reads its body);
- while `cap` connections are open, a new one's request is answered 503 JSON and it is closed;
- the process keeps RESERVE_FDS file descriptors free (a log file, the page's font, torch): a connection past
  the budget the open-files limit leaves (`connection_limits`) closes the oldest idle one (or, with none idle,
  itself) at once, so accept() never fails with EMFILE and a flood of idle connections cannot keep a client
  with a request out.

    protocol = limited_protocol(Limits(10, 30, *connection_limits(512)), metrics)
    uvicorn.Config(app, http=protocol, timeout_keep_alive=5)
"""

from __future__ import annotations

import asyncio
import json
import os
import resource
from dataclasses import dataclass

import h11
from uvicorn.protocols.http.h11_impl import H11Protocol

from scratchformer.serve.metrics import Metrics

RESERVE_FDS = 32  # descriptors kept free for everything but connections: the listening socket, logs, files, torch
BACKSTOP = 1.0  # seconds after body_timeout at which a body still arriving is closed without an answer


@dataclass(frozen=True)
class Limits:
    header_timeout: float
    body_timeout: float
    cap: int  # connections served at once; more get 503
    budget: int  # connections held at all (503 included); more are closed at once


def connection_limits(max_connections: int, reserve: int = RESERVE_FDS) -> tuple[int, int]:
    """(cap, budget): connections served at once, and held at all (those between answered 503). The budget is
    the soft open-files limit less the descriptors open now and `reserve`, at most cap + a quarter (at least 8)
    for the 503 answers; when that is short, the cap gives way to keep a fifth of the budget for them."""
    wanted = max_connections + max(8, max_connections // 4)
    soft, _ = resource.getrlimit(resource.RLIMIT_NOFILE)
    budget = wanted
    if soft != resource.RLIM_INFINITY:
        try:
            open_now = len(os.listdir("/proc/self/fd"))
        except OSError:  # no /proc: count conservatively
            open_now = 64
        budget = max(2, min(wanted, soft - open_now - reserve))
    return min(max_connections, budget - max(1, budget // 5)), budget


def limited_protocol(limits: Limits, metrics: Metrics) -> type[H11Protocol]:
    """uvicorn's H11Protocol with `limits` (see the module docstring), counting what it closes in `metrics`."""

    async def over_cap(scope, receive, send) -> None:  # the ASGI app a connection over the cap gets
        body = json.dumps({"error": f"this server is answering {limits.cap} connections already (max_connections):"
                                    " try again shortly"}).encode()
        await send({"type": "http.response.start", "status": 503,
                    "headers": [(b"content-type", b"application/json"), (b"content-length", str(len(body)).encode()),
                                (b"connection", b"close"), (b"retry-after", b"1")]})
        await send({"type": "http.response.body", "body": body, "more_body": False})
        metrics.closed["over_cap"] += 1

    class LimitedProtocol(H11Protocol):
        def connection_made(self, transport: asyncio.Transport) -> None:  # type: ignore[override]
            super().connection_made(transport)
            self._header_timer: asyncio.TimerHandle | None = None
            self._body_timer: asyncio.TimerHandle | None = None
            self._since = self.loop.time()
            metrics.connections = len(self.connections)
            if len(self.connections) > limits.budget:  # no descriptor to spare: the oldest idle one goes, else this
                metrics.closed["fd_budget"] += 1
                idle = [c for c in self.connections if c is not self and getattr(c, "idle", lambda: False)()]
                victim = min(idle, key=lambda c: c._since, default=self)
                victim.transport.abort()
                if victim is self:
                    return
            if len(self.connections) > limits.cap:
                self.app = over_cap  # its request, when it comes, gets 503 JSON, then the connection is closed
            self._arm_header_timer()

        def idle(self) -> bool:
            """No request in progress: before its first request's headers are all in, or between requests."""
            return self.conn.their_state is h11.IDLE and (self.cycle is None or self.cycle.response_complete) \
                and not self.transport.is_closing()

        def connection_lost(self, exc: Exception | None) -> None:
            self._cancel_timers()
            super().connection_lost(exc)
            metrics.connections = len(self.connections)

        def _cancel_timers(self) -> None:
            for timer in (getattr(self, "_header_timer", None), getattr(self, "_body_timer", None)):
                if timer is not None:
                    timer.cancel()
            self._header_timer = self._body_timer = None

        def _arm_header_timer(self) -> None:
            if self._header_timer is None:
                self._header_timer = self.loop.call_later(limits.header_timeout, self._close, "header_timeout")

        def _close(self, reason: str) -> None:
            self._header_timer = self._body_timer = None
            if not self.transport.is_closing():
                metrics.closed[reason] += 1
                self.transport.close()

        def handle_events(self) -> None:
            super().handle_events()
            if self.transport.is_closing():
                return
            state = self.conn.their_state
            if state is not h11.IDLE and self._header_timer is not None:  # the headers are in
                self._header_timer.cancel()
                self._header_timer = None
            if state is h11.SEND_BODY and self._body_timer is None:
                self._body_timer = self.loop.call_later(limits.body_timeout + BACKSTOP, self._close, "body_timeout")
            elif state is not h11.SEND_BODY and self._body_timer is not None:
                self._body_timer.cancel()
                self._body_timer = None

        def on_response_complete(self) -> None:
            super().on_response_complete()
            if not self.transport.is_closing() and self.conn.their_state is h11.IDLE:
                self._since = self.loop.time()
                self._arm_header_timer()  # the next request's headers: within header_timeout too

    return LimitedProtocol

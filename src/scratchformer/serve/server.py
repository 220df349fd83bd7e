"""`scratchformer serve`'s start-up and shutdown: load the run once, check every setting, bind the socket (a port in
use is one line, before anything else), then uvicorn until SIGTERM / Ctrl-C, which stops accepting, answers the
requests in flight (for at most SHUTDOWN_GRACE seconds), cancels the decoding nobody waits for any more, and
returns."""

from __future__ import annotations

import ipaddress
import math
import signal
import socket
import sys
import warnings
from collections.abc import Mapping
from pathlib import Path
from typing import Any

from scratchformer.errors import N_, ConfigError, ScratchformerWarning
from scratchformer.i18n import _
from scratchformer.runs import load_run
from scratchformer.serve.app import Settings, begin_shutdown, create_app
from scratchformer.serve.decoder import RunTranslator, run_languages
from scratchformer.serve.protocol import Limits, connection_limits, limited_protocol

LISTEN_BACKLOG = 2048  # connections the kernel queues before we accept them (no descriptor of ours yet)
ACCEPT_BURST = 4  # connections asyncio accepts per loop turn: each holds a descriptor a few turns unrefused
SHUTDOWN_GRACE = 10.0  # seconds SIGTERM leaves the requests in flight (as a process manager's stop timeout does)


def _limit(name: str, value: object) -> str:
    """A server limit as the command line sets it: `--set max_chars=0`."""
    return f"--set {name}={value}"


def check_settings(settings: Settings, port: int) -> None:
    """One-line ConfigErrors for server settings that cannot work, before the (slow) model load (the decoding
    options check themselves: config/decoding.py)."""
    if not 0 <= port <= 65535:
        raise ConfigError(N_("--port {port}: a TCP port is 0 to 65535 (0 picks a free one)"), port=port)
    for name in ("max_batch_tokens", "max_chars", "max_sentences", "max_beam", "max_cost", "max_connections"):
        if getattr(settings, name) < 1:
            raise ConfigError(N_("{option}: must be >= 1"), option=_limit(name, getattr(settings, name)))
    if not 0 <= settings.batch_wait_ms <= 10_000:  # NaN fails too
        raise ConfigError(N_("{option}: give 0 (no merging) to 10000 milliseconds"),
                          option=_limit("batch_wait_ms", settings.batch_wait_ms))
    if not 0 < settings.timeout <= 86_400:
        raise ConfigError(N_("{option}: give seconds > 0 (a request that waits longer gets 408)"),
                          option=_limit("timeout", settings.timeout))
    for name in ("header_timeout", "body_timeout", "keep_alive_timeout"):
        if not 0 < getattr(settings, name) <= 86_400:  # NaN fails too
            raise ConfigError(N_("{option}: give seconds > 0 (a connection slower than that is closed)"),
                              option=_limit(name, getattr(settings, name)))
    if settings.api_key is not None:
        if not settings.api_key:
            raise ConfigError(N_("--api-key '': give a key clients must send, or leave --api-key out"))
        try:  # compared as UTF-8 bytes (app.key_matches): an argument that was not UTF-8 could never match
            settings.api_key.encode("utf-8")
        except UnicodeEncodeError:
            raise ConfigError(N_("--api-key: the key is not valid UTF-8 text (check the terminal's "
                                 "encoding)")) from None
    for name in settings.allowed_hosts:
        if not name or any(c in name for c in "/ @"):
            raise ConfigError(N_("--allowed-host {name!r}: give a host name such as translate.example.org (or '*')"),
                              name=name)


def is_loopback(host: str) -> bool:
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return host == "localhost"


def bind(host: str, port: int) -> socket.socket:
    """A listening TCP socket on host:port (port 0: a free one); OSError (address in use, no such host) else."""
    family = socket.AF_INET6 if ":" in host else socket.AF_INET
    sock = socket.socket(family, socket.SOCK_STREAM)
    sock.setsockopt(socket.SOL_SOCKET, socket.SO_REUSEADDR, 1)
    try:
        sock.bind((host, port))
    except OSError as e:
        sock.close()
        raise ConfigError(N_("cannot listen on {host}:{port}: {reason}"), host=host, port=port,
                          reason=e.strerror or e) from None
    sock.listen(LISTEN_BACKLOG)
    return sock


def _uvicorn_server(config, on_exit):
    """uvicorn's Server, calling `on_exit()` when a signal asks it to stop (its own handler runs first). asyncio
    accepts up to `backlog` connections in one go before any of them runs a line of ours: config.backlog is
    ACCEPT_BURST, within the descriptors protocol.py keeps in reserve, and the kernel's queue is set back to
    LISTEN_BACKLOG once it serves."""
    import uvicorn

    class Server(uvicorn.Server):
        def handle_exit(self, sig, frame) -> None:
            super().handle_exit(sig, frame)
            on_exit()

        async def startup(self, sockets=None) -> None:
            await super().startup(sockets)
            for sock in sockets or []:
                sock.listen(LISTEN_BACKLOG)

    return Server(config)


def serve(run_dir: str | Path, settings: Settings | None = None, port: int = 5000, weights: str | None = None,
          log_level: str = "warning", decoding: Mapping[str, Any] | None = None) -> int:
    """Serve the run in `run_dir` on `settings.host`:`port` until SIGTERM or Ctrl-C; returns 0 after a graceful stop.
    `settings.source` / `.target` (empty: from the run's corpus name); `decoding`: decoding options by name (serve's
    flags and --set keys; engine, beam, alpha, dtype, ...) over the run's decoding.json."""
    import uvicorn  # late: only this command needs the web stack

    settings = settings or Settings("", "")
    host = settings.host
    check_settings(settings, port)
    if not is_loopback(host) and settings.api_key is None:
        warnings.warn(ScratchformerWarning(N_("--host {host}: anyone who can reach this port can use the service (no "
                                              "authentication); add --api-key KEY to require a key"), host=host),
                      stacklevel=2)
    run = load_run(run_dir, weights)
    beam = {} if settings.beam is None else {"beam": settings.beam}  # Settings' beam: the API's way to give it
    translator = RunTranslator(run, {**(decoding or {}), **beam})
    settings.beam = translator.options.beam  # the run's own unless --beam was given
    if settings.beam > settings.max_beam:  # a limit, not an option: the server's beam within what requests may ask
        raise ConfigError(N_("{option}: more than {limit}"), option=translator.options.name("beam"),
                          limit=_limit("max_beam", settings.max_beam))
    settings.source, settings.target = run_languages(run, settings.source, settings.target)
    sock = bind(host, port)
    where = f"[{host}]" if ":" in host else host
    print(_("scratchformer serve: {run} ({source}->{target}, engine {engine}, beam {beam}, batch wait {wait:g} ms) "
            "on {url}").format(run=run_dir, source=settings.source, target=settings.target, engine=translator.engine,
                                beam=settings.beam, wait=settings.batch_wait_ms,
                                url=f"http://{where}:{sock.getsockname()[1]}"), file=sys.stderr, flush=True)
    # SIGTERM: bodies still arriving get 503 at once (begin_shutdown); requests being decoded get up to
    # SHUTDOWN_GRACE s to be answered, then the batcher answers the rest 503 and stops its decoding at the next step
    # (batcher.abort), before uvicorn's own limit would cancel them (500). Connections: protocol.py's limits,
    # within what the open-files limit leaves (connection_limits)
    app = create_app(translator, settings)
    limits = Limits(settings.header_timeout, settings.body_timeout, *connection_limits(settings.max_connections))
    protocol = limited_protocol(limits, app.state.metrics)
    config = uvicorn.Config(app, log_level=log_level, access_log=False, http=protocol,
                            timeout_keep_alive=settings.keep_alive_timeout,  # type: ignore[arg-type] (a float works)
                            timeout_graceful_shutdown=math.ceil(SHUTDOWN_GRACE) + 3, backlog=ACCEPT_BURST)
    if limits.cap < settings.max_connections:
        warnings.warn(ScratchformerWarning(N_("--set max_connections={asked}: the open-files limit (ulimit -n) leaves "
                                              "room for {cap} connections; serving at most that many"),
                                           asked=settings.max_connections, cap=limits.cap), stacklevel=2)

    def on_exit() -> None:
        begin_shutdown(app)
        app.state.batcher.abort_later(SHUTDOWN_GRACE)

    stopped: list[int] = []
    previous = signal.signal(signal.SIGTERM, lambda sig, frame: stopped.append(sig))  # uvicorn re-raises it at exit
    try:
        _uvicorn_server(config, on_exit).run(sockets=[sock])
    finally:
        signal.signal(signal.SIGTERM, previous)
        sock.close()
    if stopped:
        print(_("scratchformer serve: stopped by SIGTERM, after answering the requests in flight (those still "
                "decoding after {grace:g} s got 503)").format(grace=SHUTDOWN_GRACE), file=sys.stderr, flush=True)
    return 0


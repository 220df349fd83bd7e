"""Clients that hold connections (issue 42, findings 8, 9, 11, 12), with raw sockets on 127.0.0.1: a body that
trickles in gets 408 and is closed; idle and slow-header connections are closed; connections over the cap get 503;
a client that leaves mid-body is one log line and a 499, not a traceback and a 500; SIGTERM while bodies are
arriving answers them 503 "shutting down" and the process exits. Meanwhile a normal request is answered. Every
timeout is configured short (a second or two), so each test takes seconds; the only durations asserted are
generous upper bounds against a hang."""

from __future__ import annotations

import json
import re
import signal
import socket
import threading
import time

import pytest

from .conftest import request, start_server

LANGS = ("--source", "en", "--target", "zh")
SHORT = ("--set", "header_timeout=1", "--set", "body_timeout=2", "--set", "keep_alive_timeout=1")
HANG = 60.0  # seconds: an upper bound that only a hang passes


def address(url: str) -> tuple[str, int]:
    host, port = url.removeprefix("http://").rsplit(":", 1)
    return host, int(port)


def head(length: int, path: str = "/translate") -> bytes:
    return (f"POST {path} HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
            f"Content-Length: {length}\r\n\r\n").encode()


class Held:
    """One raw connection that sends `first`, then one byte of `trickle` every `every` seconds, and records what
    comes back until the server closes it (or HANG seconds pass)."""

    def __init__(self, url: str, first: bytes = b"", trickle: bytes = b"", every: float = 0.3) -> None:
        self.sock = socket.create_connection(address(url), timeout=10)
        self.first, self.trickle, self.every = first, trickle, every
        self.answer, self.closed, self.gave_up = bytearray(), threading.Event(), False
        self.thread = threading.Thread(target=self._run, daemon=True)
        self.thread.start()

    def _run(self) -> None:
        end = time.monotonic() + HANG
        try:
            if self.first:
                self.sock.sendall(self.first)
            pending = iter(self.trickle)
            self.sock.settimeout(self.every)
            while True:
                if time.monotonic() > end:
                    self.gave_up = True  # the server never closed it
                    break
                try:
                    data = self.sock.recv(65536)
                    if not data:
                        break
                    self.answer += data
                    continue
                except TimeoutError:
                    pass
                byte = next(pending, None)
                if byte is not None:
                    self.sock.sendall(bytes([byte]))
        except OSError:  # reset or broken pipe: closed too
            pass
        finally:
            self.closed.set()
            self.sock.close()

    def wait(self) -> tuple[int | None, object]:
        """(status, JSON body) of what came back before the close; (None, None) for a close without an answer."""
        assert self.closed.wait(HANG + 10) and not self.gave_up, f"the server kept a connection open {HANG:g} s"
        if not self.answer:
            return None, None
        head_, _, body = bytes(self.answer).partition(b"\r\n\r\n")
        status = int(head_.split()[1])
        return status, json.loads(body) if b"application/json" in head_.lower() else body.decode()


def translate_ok(url: str) -> None:
    status, out, _ = request(url, "/translate", {"q": "Open the file.", "source": "en", "target": "zh"},
                             timeout=HANG)
    assert status == 200 and isinstance(out["translatedText"], str), out


def metrics(url: str) -> str:
    return request(url, "/metrics", timeout=HANG)[1]


@pytest.fixture(scope="module")
def server(tiny_run):
    server = start_server(tiny_run, *LANGS, *SHORT, "--set", "max_connections=6")
    yield server
    assert server.stop() == 0
    assert "Traceback" not in "".join(server.stderr), "".join(server.stderr)[-3000:]


def test_a_slow_body_gets_408_and_is_closed(server):
    slow = [Held(server.url, head(100) + b'{"q": "', b"x" * 93) for _ in range(3)]  # a byte every 0.3 s: ~28 s
    translate_ok(server.url)  # meanwhile
    for held in slow:
        status, out = held.wait()
        assert status == 408 and "body" in out["error"] and "body_timeout" in out["error"], out


def test_idle_and_slow_header_connections_are_closed(server):
    idle = [Held(server.url) for _ in range(2)]
    slow_header = [Held(server.url, b"POST /translate HTTP/1.1\r\n", b"X-Slow: " + b"a" * 200) for _ in range(2)]
    kept = Held(server.url, b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n")  # then idles, kept alive
    translate_ok(server.url)  # meanwhile
    for held in [*idle, *slow_header]:
        assert held.wait()[0] in (None, 408)  # closed, with or without a word
    assert kept.wait()[0] == 200  # its answer, then closed once idle


def test_connections_over_the_cap_get_503_then_service_resumes(server):
    idle = [Held(server.url) for _ in range(6)]
    time.sleep(0.2)  # connected
    status, out, _ = request(server.url, "/translate", {"q": "Open the file."}, timeout=HANG)
    assert status == 503 and "connections" in out["error"], out
    for held in idle:
        assert held.wait() == (None, None)  # the header timeout closed them
    translate_ok(server.url)


def test_a_client_that_leaves_mid_body_is_a_499_and_one_line(server):
    before = len(server.stderr)
    with socket.create_connection(address(server.url), timeout=10) as sock:
        sock.sendall(head(100) + b'{"q": "')  # 7 of 100 bytes, then gone
    end = time.monotonic() + HANG
    while '/translate",code="499"' not in (text := metrics(server.url)):
        assert time.monotonic() < end, text
        time.sleep(0.1)
    assert 'code="500"' not in text
    time.sleep(0.5)  # the log line is written before the request is counted; give stderr's reader a moment
    logged = server.stderr[before:]
    assert len(logged) == 1 and "left" in logged[0] and "Traceback" not in logged[0], logged


def test_a_normal_request_is_answered_with_few_file_descriptors(tiny_run):
    """Under a low open-files limit (as `prlimit --nofile`), more held connections than the limit allows: the
    server never runs out of descriptors (the oldest idle connections are closed to make room), a normal request
    gets an answer meanwhile, and a translation once the idle ones are closed."""
    server = start_server(tiny_run, *LANGS, *SHORT, "--set", "max_connections=1000", nofile=128)
    try:
        held = []
        for _ in range(150):  # more than 128 descriptors' worth
            try:
                held.append(Held(server.url))
            except OSError:
                break
        status, out, _ = request(server.url, "/translate", {"q": "Open the file."}, timeout=HANG)
        assert status in (200, 503), (status, out)  # a translation, or "too many connections": never a hang
        for h in held:
            h.wait()
        translate_ok(server.url)
        refused = re.search(r'^scratchformer_serve_connections_refused_total\{reason="fd_budget"\} (\d+)$',
                            metrics(server.url), re.M)
        assert int(refused[1]) > 0  # the budget was reached: the oldest idle connections made room
    finally:
        assert server.stop() == 0
    log = "".join(server.stderr)
    assert "Too many open files" not in log and "Traceback" not in log, log[-3000:]


def test_sigterm_while_bodies_arrive_answers_503_and_exits(tiny_run):
    server = start_server(tiny_run, *LANGS, "--set", "body_timeout=600")
    try:
        slow = [Held(server.url, head(100) + b'{"q": "', b"x" * 93, every=0.5) for _ in range(3)]
        end = time.monotonic() + HANG
        while not re.search(r"^scratchformer_serve_requests_in_flight 4$", metrics(server.url), re.M):
            assert time.monotonic() < end, "the slow requests never arrived"  # 3 and the /metrics request itself
            time.sleep(0.1)
        server.proc.send_signal(signal.SIGTERM)
        for held in slow:
            status, out = held.wait()
            assert status == 503 and "shutting down" in out["error"], (status, out)
        assert server.proc.wait(HANG) == 0
    finally:
        server.stop(signal.SIGKILL)
    log = "".join(server.stderr)
    assert "Traceback" not in log and "CancelledError" not in log, log[-3000:]

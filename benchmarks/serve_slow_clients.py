#!/usr/bin/env python3
"""Clients that hold connections, against a live `scratchformer serve` on 127.0.0.1 (issue 42, findings 8 and 9):
how long until the server answers 408 or closes them, how many file descriptors it holds meanwhile, and how long
a normal request takes while they hang on.

    PYTHONPATH=src .venv/bin/python benchmarks/serve_slow_clients.py [RUN_DIR] [--each 20] [--nofile 256]

It starts the server itself (`--port 0`, loopback only) with short limits (--set header_timeout=2 --set body_timeout=3
--set keep_alive_timeout=1 by default, so a run takes seconds), then opens `--each` connections of each kind:

    slow-body    headers, 7 bytes of a 100-byte body, then one byte every --every seconds
    slow-header  a request line, then one header byte every --every seconds
    idle         connects and sends nothing
    kept-alive   one GET /health, then idles on the open connection

and, while they hang on, posts a normal /translate every half second. It prints, per kind, the time from connect
to the server's answer or close (median and max) and what came back; the server's open descriptors (before,
peak, after); and the normal requests' status and latency. Bounded: at most 200 connections of each kind, every
socket with a deadline; nothing but 127.0.0.1, nothing written. `--nofile` runs the server under a lower
open-files limit, as `prlimit --nofile` (issue 42 saw a hang at 256 with 300 idle connections).
"""

from __future__ import annotations

import argparse
import json
import os
import re
import socket
import statistics
import subprocess
import sys
import threading
import time
import urllib.error
import urllib.request
from pathlib import Path

ROOT = Path(__file__).resolve().parents[1]
DEADLINE = 120.0  # seconds any held connection is kept at most, whatever the server does


def start_server(run: str, flags: list[str], nofile: int | None) -> tuple[subprocess.Popen, str]:
    env = {**os.environ, "PYTHONPATH": f"{ROOT / 'src'}{os.pathsep}{os.environ.get('PYTHONPATH', '')}"}

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", run, "--host", "127.0.0.1", "--port",
                             "0", "--threads", "1", *flags], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit if nofile else None)
    for line in proc.stderr:
        if " on http://" in line:
            threading.Thread(target=lambda: [None for _ in proc.stderr], daemon=True).start()  # keep draining
            return proc, line.rsplit(" on ", 1)[1].strip()
        print(line, end="", file=sys.stderr)
    raise SystemExit(f"the server did not start (exit {proc.wait()})")


class Held(threading.Thread):
    """One connection: sends `first`, then a byte of `trickle` every `every` s; records when the server answered
    or closed it."""

    def __init__(self, address: tuple[str, int], first: bytes, trickle: bytes, every: float) -> None:
        super().__init__(daemon=True)
        self.address, self.first, self.trickle, self.every = address, first, trickle, every
        self.seconds: float | None = None
        self.outcome = "open"

    def run(self) -> None:
        start = time.monotonic()
        try:
            with socket.create_connection(self.address, timeout=10) as sock:
                if self.first:
                    sock.sendall(self.first)
                pending, answer = iter(self.trickle), b""
                sock.settimeout(self.every)
                while time.monotonic() - start < DEADLINE:
                    try:
                        data = sock.recv(65536)
                    except TimeoutError:
                        byte = next(pending, None)
                        if byte is not None:
                            sock.sendall(bytes([byte]))
                        continue
                    if not data:
                        break
                    answer += data
                else:
                    return
                self.seconds = time.monotonic() - start
                statuses = [m.decode() for m in re.findall(rb"HTTP/1\.1 (\d{3})", answer)]
                self.outcome = "+".join(statuses) + " then closed" if statuses else "closed"
        except OSError as e:
            self.seconds, self.outcome = time.monotonic() - start, f"reset ({e.__class__.__name__})"


def open_fds(pid: int) -> int:
    try:
        return len(os.listdir(f"/proc/{pid}/fd"))
    except OSError:
        return -1


def translate(url: str) -> tuple[str, float]:
    body = json.dumps({"q": "Open the file.", "source": "en", "target": "zh"}).encode()
    request = urllib.request.Request(url + "/translate", data=body, headers={"Content-Type": "application/json"})
    start = time.monotonic()
    try:
        with urllib.request.urlopen(request, timeout=60) as response:
            status = str(response.status)
    except urllib.error.HTTPError as e:
        status = str(e.code)
    except OSError as e:
        status = e.__class__.__name__
    return status, time.monotonic() - start


def main() -> None:
    parser = argparse.ArgumentParser(description=__doc__.split("\n")[0])
    parser.add_argument("run", nargs="?", default=str(ROOT / "models" / "en-zh"), help="a run (default en-zh)")
    parser.add_argument("--each", type=int, default=20, help="connections of each kind (at most 200; default 20)")
    parser.add_argument("--every", type=float, default=0.5, help="seconds between trickled bytes (default 0.5)")
    parser.add_argument("--nofile", type=int, default=None, help="the server's open-files limit (prlimit --nofile)")
    parser.add_argument("--flags", default="--set header_timeout=2 --set body_timeout=3 --set keep_alive_timeout=1",
                        help="serve's limits (default: %(default)s)")
    args = parser.parse_args()
    each = max(1, min(args.each, 200))
    proc, url = start_server(args.run, ["--source", "en", "--target", "zh", *args.flags.split()], args.nofile)
    host, port = url.removeprefix("http://").rsplit(":", 1)
    address = (host, int(port))
    try:
        translate(url)  # warm up
        before = open_fds(proc.pid)
        head = (b"POST /translate HTTP/1.1\r\nHost: 127.0.0.1\r\nContent-Type: application/json\r\n"
                b"Content-Length: 100\r\n\r\n")
        kinds = {"slow-body": (head + b'{"q": "', b"x" * 93), "slow-header": (b"POST /translate HTTP/1.1\r\n",
                                                                              b"X-Slow: " + b"a" * 500),
                 "idle": (b"", b""), "kept-alive": (b"GET /health HTTP/1.1\r\nHost: 127.0.0.1\r\n\r\n", b"")}
        held = {kind: [Held(address, first, trickle, args.every) for _ in range(each)]
                for kind, (first, trickle) in kinds.items()}
        start = time.monotonic()
        for threads in held.values():
            for thread in threads:
                thread.start()
        peak, normal = before, []
        while any(t.is_alive() for threads in held.values() for t in threads):
            peak = max(peak, open_fds(proc.pid))
            normal.append(translate(url))
            time.sleep(0.5)
        after = open_fds(proc.pid)
        print(f"serve {args.run} ({args.flags}{f', nofile {args.nofile}' if args.nofile else ''}): {each} "
              f"connections of each kind, all closed after {time.monotonic() - start:.1f} s")
        for kind, threads in held.items():
            times = [t.seconds for t in threads if t.seconds is not None]
            outcomes: dict[str, int] = {}
            for t in threads:
                outcomes[t.outcome] = outcomes.get(t.outcome, 0) + 1
            print(f"  {kind:<11} answered or closed after median {statistics.median(times):5.2f} s, max "
                  f"{max(times):5.2f} s: " + ", ".join(f"{n} {o}" for o, n in outcomes.items()))
        print(f"  server's open descriptors: {before} before, {peak} at most, {after} after")
        latencies = sorted(s for status, s in normal if status == "200")
        statuses: dict[str, int] = {}
        for status, _ in normal:
            statuses[status] = statuses.get(status, 0) + 1
        if latencies:
            print(f"  normal /translate meanwhile: {len(normal)} requests ({statuses}), latency median "
                  f"{statistics.median(latencies):.3f} s, max {latencies[-1]:.3f} s")
        else:
            print(f"  normal /translate meanwhile: {len(normal)} requests, none answered 200 ({statuses})")
    finally:
        proc.terminate()
        proc.wait(60)


if __name__ == "__main__":
    main()

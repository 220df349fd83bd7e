"""Shared tools for the service tests: a tiny random run, `scratchformer serve` in a real subprocess on a free port
(--port 0: the server binds, then prints its address), a small stdlib HTTP client, and the CLI's own output as
the reference."""

from __future__ import annotations

import contextlib
import io
import json
import os
import signal
import subprocess
import sys
import threading
import urllib.error
import urllib.request
from dataclasses import dataclass, field
from pathlib import Path

import pytest

from scratchformer.data.tokenizers import train_tokenizer
from scratchformer.runs import save_weights

SRC = Path(__file__).resolve().parents[2] / "src"  # the checkout under test, ahead of any installed copy
TEXTS = ["Open the file.", "Close the window now.", "Save the page as text.", "Print it.", "Quit?",
         "Move the window to the left of the screen.", "Copy the cell.", "Insert a table here."]


@pytest.fixture(scope="session")
def tiny_run(tmp_path_factory, tiny_seq2seq) -> Path:
    """A run directory of a random tiny model (char tokenizer both sides, max_len 48): outputs differ by input."""
    run_dir = tmp_path_factory.mktemp("serve") / "run"
    run_dir.mkdir()
    tok = train_tokenizer("char", TEXTS)
    model = tiny_seq2seq(0, tok.vocab_size, tie_embeddings=False, max_len=48)
    model.config.save(run_dir / "config.json")
    tok.save(run_dir / "tokenizer_src.json")
    tok.save(run_dir / "tokenizer_tgt.json")
    save_weights(model, run_dir / "model.safetensors")
    return run_dir


@dataclass
class Server:
    proc: subprocess.Popen
    url: str
    stderr: list[str] = field(default_factory=list)

    def stop(self, sig: int = signal.SIGTERM, timeout: float = 60) -> int:
        if self.proc.poll() is None:
            self.proc.send_signal(sig)
        return self.proc.wait(timeout=timeout)


def start_server(run_dir: Path, *flags: str, timeout: float = 120, nofile: int | None = None) -> Server:
    """`scratchformer serve RUN_DIR --port 0 FLAGS` in a subprocess (one torch thread); returns once it listens.
    nofile: the server's soft limit on open file descriptors (as `prlimit --nofile`)."""
    env = {**os.environ, "PYTHONPATH": f"{SRC}{os.pathsep}{os.environ.get('PYTHONPATH', '')}",
           "OMP_NUM_THREADS": "1", "MKL_NUM_THREADS": "1"}

    def limit() -> None:
        import resource

        resource.setrlimit(resource.RLIMIT_NOFILE, (nofile, resource.getrlimit(resource.RLIMIT_NOFILE)[1]))

    proc = subprocess.Popen([sys.executable, "-m", "scratchformer", "serve", str(run_dir), "--port", "0",
                             "--threads", "1", *flags], env=env, stdout=subprocess.DEVNULL,
                            stderr=subprocess.PIPE, text=True, preexec_fn=limit if nofile else None)
    server = Server(proc, "")
    ready = threading.Event()

    def read() -> None:  # keeps draining stderr, so the server never blocks on a full pipe
        for line in proc.stderr:
            server.stderr.append(line)
            if " on http://" in line and not server.url:
                server.url = line.rsplit(" on ", 1)[1].strip()
                ready.set()
        ready.set()

    threading.Thread(target=read, daemon=True).start()
    ready.wait(timeout)
    if not server.url:
        proc.kill()
        raise AssertionError(f"the server did not start: {''.join(server.stderr)[-3000:]}")
    return server


def request(url: str, path: str, body: object = None, *, data: bytes | None = None, content_type: str | None = None,
            method: str | None = None, timeout: float = 120) -> tuple[int, object, str]:
    """(status, the JSON answer, the text or the bytes, content type) of one HTTP request; `body` goes as JSON."""
    headers = {}
    if body is not None:
        data, content_type = json.dumps(body).encode(), content_type or "application/json"
    if content_type:
        headers["Content-Type"] = content_type
    req = urllib.request.Request(url + path, data=data, headers=headers, method=method)
    try:
        with urllib.request.urlopen(req, timeout=timeout) as response:
            status, raw, kind = response.status, response.read(), response.headers.get("Content-Type", "")
    except urllib.error.HTTPError as e:
        status, raw, kind = e.code, e.read(), e.headers.get("Content-Type", "")
    if kind.startswith("application/json"):
        return status, json.loads(raw), kind
    return status, raw.decode("utf-8") if kind.startswith("text/") else raw, kind


def cli_lines(*args: str) -> list[str]:
    """What `scratchformer translate ARGS` prints (in-process), one entry per line."""
    from scratchformer.cli import main

    out = io.StringIO()
    with contextlib.redirect_stdout(out):
        assert main(["translate", *args]) == 0
    return out.getvalue().split("\n")[:-1]


@dataclass
class Answer:
    status: int
    body: object  # the JSON answer, else the text
    pulled: int  # body chunks the app read (of those offered)


async def asgi(app, method: str, path: str, body: bytes = b"", *, content_type: str | None = None,
               headers: dict[str, str] | None = None, chunks=None) -> Answer:
    """One request to an ASGI app in-process, as uvicorn hands it over: `body` with its Content-Length, or `chunks`
    (any iterable of bytes) as a chunked body, pulled only as the app reads it. An exception the app lets out
    (a 500 on a real server) comes back as status 500 with its text."""
    import asyncio

    path, _, query = path.partition("?")
    head = {"host": "127.0.0.1:5000", **({"content-type": content_type} if content_type else {}),
            **{k.lower(): v for k, v in (headers or {}).items()}}
    if chunks is None:
        head["content-length"], pieces, sized = str(len(body)), iter([body]), True
    else:
        head["transfer-encoding"], pieces, sized = "chunked", iter(chunks), False
    scope = {"type": "http", "asgi": {"version": "3.0"}, "http_version": "1.1", "method": method, "scheme": "http",
             "path": path, "raw_path": path.encode(), "query_string": query.encode("latin-1"), "root_path": "",
             "headers": [(k.encode("latin-1"), v.encode("utf-8")) for k, v in head.items()],
             "client": ("127.0.0.1", 40000), "server": ("127.0.0.1", 5000)}
    pulled, finished, status, out = 0, False, 0, bytearray()
    complete = asyncio.Event()

    async def receive() -> dict:
        nonlocal pulled, finished
        if finished:  # the body was read: a real client stays until its answer came
            await complete.wait()
            return {"type": "http.disconnect"}
        if sized:
            finished = True
            return {"type": "http.request", "body": next(pieces), "more_body": False}
        chunk = next(pieces, None)
        if chunk is None:
            finished = True
            return {"type": "http.request", "body": b"", "more_body": False}
        pulled += 1
        return {"type": "http.request", "body": chunk, "more_body": True}

    async def send(message: dict) -> None:
        nonlocal status
        if message["type"] == "http.response.start":
            status = message["status"]
        elif message["type"] == "http.response.body":
            out.extend(message.get("body", b""))
            if not message.get("more_body"):
                complete.set()

    try:
        await app(scope, receive, send)
    except Exception as e:  # noqa: BLE001 (what uvicorn turns into a 500)
        return Answer(500, f"{type(e).__name__}: {e}", pulled)
    text = out.decode("utf-8", "replace")
    try:
        return Answer(status, json.loads(text), pulled)
    except ValueError:
        return Answer(status, text, pulled)


def run_service(translator, settings, scenario):
    """`scenario(app)` (a coroutine function) against the app of `translator` and `settings`, its batcher
    started and stopped around it (the lifespan uvicorn runs)."""
    import asyncio

    from scratchformer.serve import create_app

    async def main():
        app = create_app(translator, settings)
        await app.state.batcher.start()
        try:
            return await scenario(app)
        finally:
            await app.state.batcher.stop()

    return asyncio.run(main())

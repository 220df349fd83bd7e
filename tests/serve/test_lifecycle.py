"""The server's life: SIGTERM with requests in flight answers them and exits 0; --api-key and --timeout; the
one-line warning of --host 0.0.0.0 without a key; flags that cannot work and a port in use as one line, exit 2."""

from __future__ import annotations

import re
import signal
import socket
import threading
import time

import pytest

from scratchformer.cli import main

from .conftest import TEXTS, cli_lines, request, start_server

LANGS = ("--source", "en", "--target", "zh")


def queued(url: str) -> int:
    _, text, _ = request(url, "/metrics")
    return int(re.search(r"^scratchformer_serve_queued_sentences (\d+)$", text, re.M)[1])


def test_sigterm_answers_the_requests_in_flight_and_exits_0(tiny_run):
    # A 3 s merging window holds the requests in the queue: SIGTERM arrives while all of them are in flight.
    server = start_server(tiny_run, *LANGS, "--set", "batch_wait_ms=3000", "--beam", "1")
    jobs = [TEXTS[:3], [TEXTS[3]], TEXTS[4:]]
    answers: dict[int, tuple] = {}

    def client(i: int) -> None:
        answers[i] = request(server.url, "/translate", {"q": jobs[i], "source": "en", "target": "zh"})[:2]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
    try:
        for t in threads:
            t.start()
        while queued(server.url) < sum(map(len, jobs)):  # until every request waits in the queue
            assert not answers, "a batch left before all requests arrived: lengthen --batch-wait-ms"
            time.sleep(0.02)
        server.proc.send_signal(signal.SIGTERM)
        for t in threads:
            t.join(120)
        assert server.proc.wait(120) == 0, "".join(server.stderr)
    finally:
        server.stop(signal.SIGKILL)
    expected = dict(zip(TEXTS, cli_lines(str(tiny_run), "--beam", "1", *TEXTS)))
    for i, texts in enumerate(jobs):
        assert answers[i] == (200, {"translatedText": [expected[t] for t in texts]})
    assert "stopped by SIGTERM" in "".join(server.stderr) and "Traceback" not in "".join(server.stderr)
    with pytest.raises(OSError):  # and it no longer listens
        socket.create_connection(tuple(server.url.removeprefix("http://").rsplit(":", 1)), timeout=5).close()


def test_api_key_and_timeout(tiny_run):
    server = start_server(tiny_run, *LANGS, "--host", "0.0.0.0", "--api-key", "s3cret", "--set", "timeout=0.001")
    url = "http://127.0.0.1:" + server.url.rsplit(":", 1)[1]
    try:
        assert not any("no authentication" in line for line in server.stderr)  # a key: no warning
        for fields in ({}, {"api_key": "wrong"}):
            status, out, _ = request(url, "/translate", {"q": "Hello", **fields})
            assert (status, out) == (403, {"error": "Invalid API key"})
        status, out, _ = request(url, "/translate", {"q": TEXTS[5] * 3, "api_key": "s3cret"})
        assert status == 408 and "timeout" in out["error"]  # a 48-step decoding takes more than 1 ms
        status, health, _ = request(url, "/health")
        assert status == 200  # /health needs no key
    finally:
        assert server.stop() == 0


def test_host_without_key_warns_in_one_line(capsys, tmp_path):
    assert main(["serve", str(tmp_path / "missing"), "--host", "0.0.0.0"]) == 2
    err = capsys.readouterr().err.splitlines()
    assert len(err) == 2 and "warning:" in err[0] and "no authentication" in err[0] and "--api-key" in err[0]
    assert "error:" in err[1] and "does not exist" in err[1]


@pytest.mark.parametrize("flags,words", [
    (["--set", "batch_wait_ms=-1"], "--set batch_wait_ms=-1"), (["--set", "timeout=0"], "--set timeout=0"),
    (["--port", "70000"], "65535"), (["--set", "max_chars=0"], "--set max_chars=0"), (["--beam", "0"], "--beam 0"),
    (["--beam", "20"], "--beam 20: more than --set max_beam=16"), (["--set", "alpha=-1"], "--set alpha=-1"),
    (["--source", "en"], "--target"),
    (["--batch-size", "0"], "--batch-size 0"), (["--set", "header_timeout=0"], "--set header_timeout=0"),
    (["--set", "body_timeout=nan"], "--set body_timeout=nan"),
    (["--set", "keep_alive_timeout=-1"], "--set keep_alive_timeout=-1"),
    (["--set", "max_connections=0"], "--set max_connections=0"), (["--set", "max_beam=x"], "max_beam takes"),
    (["--set", "beam=2"], "--set beam=2: give KEY=VALUE with one of the keys alpha, max_output_len"),
])
def test_flags_that_cannot_work_are_one_line(capsys, tiny_run, flags, words):
    assert main(["serve", str(tiny_run), *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


def test_a_port_in_use_is_one_line(capsys, tiny_run):
    with socket.socket() as taken:
        taken.bind(("127.0.0.1", 0))
        taken.listen()
        port = taken.getsockname()[1]
        assert main(["serve", str(tiny_run), *LANGS, "--port", str(port)]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and f"cannot listen on 127.0.0.1:{port}" in err


@pytest.mark.slow  # ~40 s on the busy 2-core machine: the export and CTranslate2's start, twice
def test_another_engine_serves_the_clis_text(tiny_run, tmp_path):
    pytest.importorskip("ctranslate2")
    import shutil

    run = shutil.copytree(tiny_run, tmp_path / "run")  # the engine caches its export in the run directory
    expected = cli_lines(str(run), "--engine", "ctranslate2", "--beam", "4", *TEXTS[:3])
    server = start_server(run, *LANGS, "--engine", "ctranslate2")
    try:
        status, out, _ = request(server.url, "/translate", {"q": TEXTS[:3], "source": "en", "target": "zh"})
        assert (status, out) == (200, {"translatedText": expected})
        status, out, _ = request(server.url, "/translate", {"q": "Hi", "alternatives": 1})
        assert status == 400 and "only --engine torch" in out["error"]
    finally:
        assert server.stop() == 0


def test_the_service_imports_nothing_from_training():
    import os
    import subprocess
    import sys

    from .conftest import SRC

    code = ("import sys, scratchformer.cli.serve_cmd, scratchformer.serve; "
            "print(sorted(m for m in sys.modules if m.startswith('scratchformer.training')))")
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True,
                         env={**os.environ, "PYTHONPATH": str(SRC)}, timeout=300)
    assert out.returncode == 0 and out.stdout.strip() == "[]", out.stderr[-2000:]

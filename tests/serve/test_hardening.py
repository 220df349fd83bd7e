"""The service against issue 35's red team, in-process (the app called as uvicorn calls it, see conftest.asgi):
a request that gave up stops its decoding, a request's cost is bounded, /health says busy, API keys compare as
UTF-8 bytes, bodies without Content-Length are refused while they stream, deep JSON, foreign content types, Host
headers, invalid UTF-8 in forms and the query, int()'s own message, the run's path."""

from __future__ import annotations

import asyncio
import json
import threading
import time
import urllib.parse

import pytest

from scratchformer.decoding import beam_search, cancel, greedy_decode
from scratchformer.decoding.spec import Search
from scratchformer.runs import load_run
from scratchformer.serve import Settings
from scratchformer.serve.app import request_cost
from scratchformer.serve.batcher import Batcher
from scratchformer.serve.decoder import RunTranslator
from scratchformer.serve.metrics import Metrics

from .conftest import TEXTS, asgi, run_service

FORM, MULTIPART = "application/x-www-form-urlencoded", "multipart/form-data; boundary=xXx"


@pytest.fixture(scope="module")
def translator(tiny_run):
    return RunTranslator(load_run(tiny_run))


def settings(**changes) -> Settings:
    return Settings("en", "zh", **{"max_chars": 400, "max_sentences": 8, "batch_wait_ms": 0, **changes})


def multipart(*parts: tuple[str, bytes], filename: str | None = None) -> bytes:
    out = b""
    for name, value in parts:
        extra = f'; filename="{filename}"' if filename else ""
        out += f'--xXx\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode() + value + b"\r\n"
    return out + b"--xXx--\r\n"


# --- the stall: cancellation, cost, /health, shutdown ---------------------------------------------------------

class Stepper:
    """A decode function that steps like a decoder (cancel.check() per step) until cancelled, for "stall" texts;
    answers others at once. Records how each call ended."""

    def __init__(self) -> None:
        self.ended: list[str] = []
        self.started = threading.Event()

    def __call__(self, texts: list[str], key: object) -> list:
        if "stall" not in texts:
            self.ended.append("answered")
            return [t.upper() for t in texts]
        self.started.set()
        try:
            for _ in range(100_000):  # ~100 s at most, if nothing ever cancels it
                cancel.check()
                time.sleep(0.001)
        except cancel.Cancelled as e:
            self.ended.append(str(e))
            raise
        self.ended.append("ran to the end")
        return texts


def batched(scenario, decode, slice_cost=None):
    async def main():
        metrics = Metrics()
        batcher = Batcher(decode, lambda texts: len(texts), 0, 1000, metrics, slice_cost)
        await batcher.start()
        try:
            return await scenario(batcher), metrics
        finally:
            await batcher.stop()

    return asyncio.run(main())


def test_a_request_that_timed_out_stops_its_decoding_and_the_next_is_answered():
    decode = Stepper()

    async def scenario(b):
        with pytest.raises(asyncio.TimeoutError):
            await asyncio.wait_for(b.submit(["stall"], 1), 0.05)
        return await asyncio.wait_for(b.submit(["save."], 1), 60)  # answered: the stall no longer holds the worker

    after, metrics = batched(scenario, decode)
    assert after == ["SAVE."] and decode.ended[0] == "decoding stopped: every request of its batch gave up"
    assert decode.ended[1:] == ["answered"] and metrics.cancelled_batches == 1


def test_stop_cancels_the_decoding_in_flight():
    decode = Stepper()

    async def scenario(b):
        task = asyncio.ensure_future(b.submit(["stall"], 1))
        while not decode.started.is_set():
            await asyncio.sleep(0.001)
        return task

    task, _ = batched(scenario, decode)  # batched() stops the batcher: it must not wait for the stall's end
    assert decode.ended == ["decoding stopped: the server is shutting down"] and task.done()


def test_a_shutdown_past_its_grace_answers_503_and_stops_the_decoding(translator, monkeypatch):
    started, ended = threading.Event(), []

    def stepping(texts, options):  # a decoder's loop that never ends by itself
        started.set()
        try:
            for _ in range(100_000):
                cancel.check()
                time.sleep(0.001)
        except cancel.Cancelled as e:
            ended.append(str(e))
            raise
        return [[("x", None)] for _ in texts]

    monkeypatch.setattr(translator, "translate", stepping)
    post = lambda app, body: asgi(app, "POST", "/translate", json.dumps(body).encode(),  # noqa: E731
                                  content_type="application/json")

    async def scenario(app):
        running = asyncio.ensure_future(post(app, {"q": ["Hello", "Bye"]}))
        while not started.is_set():  # a request answered before decoding would never set it: say what it got
            assert not running.done(), f"answered before decoding: {running.result()}"
            await asyncio.sleep(0.001)
        queued = asyncio.ensure_future(post(app, {"q": "Hi", "beam": 1}))  # other options: waits in the queue
        await asyncio.sleep(0.01)
        app.state.batcher.abort_later(0)  # what SIGTERM schedules, SHUTDOWN_GRACE seconds on
        return await running, await queued, await post(app, {"q": "Late"})

    out = run_service(translator, settings(), scenario)
    assert [(a.status, a.body) for a in out] == [(503, {"error": "the server is shutting down: try again"})] * 3
    assert ended == ["decoding stopped: the server is shutting down"]


def test_the_decoders_stop_at_a_cancelled_token(tiny_seq2seq, source_ids):
    model = tiny_seq2seq(0, 40)
    src = source_ids(1, 40, lengths=(5, 7))
    token = cancel.Token()
    with token.scope():
        plain = greedy_decode(model, src)  # not cancelled: the decoders run as ever
        token.cancel("a test")
        for decode in (lambda: greedy_decode(model, src), lambda: beam_search(model, src, Search(beam=3))):
            with pytest.raises(cancel.Cancelled, match="a test"):
                decode()
    assert greedy_decode(model, src) == plain  # no scope: never cancelled
    with cancel.Token(deadline=time.monotonic() - 1).scope(), pytest.raises(cancel.Cancelled, match="deadline"):
        beam_search(model, src, Search(beam=2))


def test_slice_cost_keeps_batches_apart():
    calls = []

    def decode(texts, key):
        calls.append(list(texts))
        return texts

    async def main():
        batcher = Batcher(decode, len, 50, 1000, Metrics(), slice_cost=100)  # merging on: a 50 ms window
        await batcher.start()
        try:
            return await asyncio.gather(batcher.submit(["a"], 1, 60), batcher.submit(["b"], 1, 60),
                                        batcher.submit(["c"], 1, 30))
        finally:
            await batcher.stop()

    assert asyncio.run(main()) == [["a"], ["b"], ["c"]]
    assert calls == [["a"], ["b", "c"]]  # 60 + 60 > 100: b waits for the next call, and c joins it


def test_a_long_request_goes_in_slices_and_a_short_one_is_not_charged_for_it():
    calls, first_slice, short_queued = [], threading.Event(), threading.Event()

    def decode(texts, key):
        calls.append(list(texts))
        if len(calls) == 1:
            first_slice.set()
            assert short_queued.wait(30)
        return [t.upper() for t in texts]

    async def scenario(b):
        long = asyncio.ensure_future(b.submit([f"l{i}" for i in range(6)], 1, [50] * 6))
        while not first_slice.is_set():
            await asyncio.sleep(0.001)
        short = asyncio.ensure_future(b.submit(["save."], 1, 60))
        await asyncio.sleep(0.01)
        short_queued.set()
        return await asyncio.gather(long, short)

    (long, short), metrics = batched(scenario, decode, slice_cost=100)
    assert calls == [["l0", "l1"], ["save."], ["l2", "l3"], ["l4", "l5"]]  # after one slice, not after all
    assert long == [f"L{i}" for i in range(6)] and short == ["SAVE."] and metrics.queued_sentences == 0


def test_the_worst_request_at_the_default_limits_is_refused_by_its_cost(tiny_run):
    translator = RunTranslator(load_run(tiny_run), {"split_sentences": True})  # as the shipped model's decoding.json
    defaults = Settings("en", "zh")  # the shipped limits: 128 sentences, 5,000 characters, beam 16
    worst = ["A. " * 13] * 128  # 4,992 characters of three-character sentences: 1,664 after splitting
    cost = request_cost(translator, worst, defaults.max_beam)
    assert cost == 16 * 1664 * 48  # every sentence's budget: its tokens + 50, capped at the model's max_len 48
    out = run_service(translator, defaults, lambda app: asgi(app, "POST", "/translate", json.dumps(
        {"q": worst, "beam": 16, "alternatives": 15}).encode(), content_type="application/json"))
    assert out.status == 413 and "max_cost" in out.body["error"], out
    assert request_cost(translator, TEXTS, 4) <= defaults.max_cost  # ordinary requests are far below it


def test_health_says_busy_while_the_worker_is_stuck(translator, monkeypatch, tiny_run):
    release = threading.Event()
    # an engine that never checks the token (CTranslate2 runs its own loop): the worker stays stuck
    monkeypatch.setattr(translator, "translate", lambda texts, options: release.wait(60) and [[("x", None)]])

    async def scenario(app):
        timed_out = await asgi(app, "POST", "/translate", b'{"q": "Hello"}', content_type="application/json")
        await asyncio.sleep(0.3)  # the stuck call is now older than --timeout
        stuck = await asgi(app, "GET", "/health")
        release.set()
        while app.state.batcher.busy_since is not None:
            await asyncio.sleep(0.01)
        return timed_out, stuck, await asgi(app, "GET", "/health")

    timed_out, stuck, free = run_service(translator, settings(timeout=0.2), scenario)
    assert timed_out.status == 408
    assert stuck.status == 503 and stuck.body["status"] == "busy" and stuck.body["busy_seconds"] >= 0.2
    assert free.status == 200 and free.body["status"] == "ok" and free.body["busy_seconds"] == 0
    assert free.body["run"] == tiny_run.name and str(tiny_run) not in json.dumps(free.body)  # no absolute path


# --- API keys -----------------------------------------------------------------------------------------------

def test_api_keys_compare_as_utf8_bytes(translator):
    async def scenario(app):
        q = urllib.parse.quote
        return [
            await asgi(app, "POST", "/translate", json.dumps({"q": "Hi", "api_key": "密钥"}).encode(),
                       content_type="application/json"),
            await asgi(app, "POST", "/translate", json.dumps({"q": "Hi", "api_key": "é"}).encode(),
                       content_type="application/json"),
            await asgi(app, "POST", "/translate", b"q=Hi&api_key=%C3%A9", content_type=FORM),
            await asgi(app, "POST", "/translate", f"q=Hi&api_key={q('密钥')}".encode(), content_type=FORM),
            await asgi(app, "POST", "/detect", json.dumps({"q": "Hi", "api_key": ["密钥"]}).encode(),
                       content_type="application/json"),
            await asgi(app, "POST", "/detect", b'{"q": "Hi", "api_key": "\\ud800"}', content_type="application/json"),
            await asgi(app, "POST", "/detect", b'{"q": "Hi"}', content_type="application/json",
                       headers={"authorization": "Bearer 密钥"}),  # sent as UTF-8 bytes
            await asgi(app, "GET", "/metrics"),
            await asgi(app, "GET", f"/metrics?api_key={q('密钥')}"),
            await asgi(app, "GET", "/health"),
        ]

    out = run_service(translator, settings(api_key="密钥"), scenario)
    assert [a.status for a in out] == [200, 403, 403, 200, 403, 403, 200, 403, 200, 200], [a.body for a in out]
    assert all(a.body == {"error": "Invalid API key"} for a in out if a.status == 403)
    out = run_service(translator, settings(api_key="s3cret"), lambda app: asgi(
        app, "POST", "/translate", json.dumps({"q": "Hi", "api_key": "é"}).encode(), content_type="application/json"))
    assert out.status == 403  # hmac.compare_digest("é", "s3cret") raised TypeError: a 500


@pytest.mark.parametrize("flags,words", [(["--api-key", ""], "--api-key ''"),
                                         (["--allowed-host", "a/b"], "--allowed-host 'a/b'"),
                                         (["--set", "max_cost=0"], "--set max_cost=0")])
def test_serve_flags_for_keys_hosts_and_cost_are_checked(capsys, tiny_run, flags, words):
    from scratchformer.cli import main

    assert main(["serve", str(tiny_run), "--source", "en", "--target", "zh", *flags]) == 2
    err = capsys.readouterr().err
    assert err.count("\n") == 1 and words in err and "Traceback" not in err


# --- bodies -------------------------------------------------------------------------------------------------

def chunks_of(piece: bytes, count: int, head: bytes = b""):
    yield head
    for _ in range(count):
        yield piece


@pytest.mark.parametrize("kind,head", [(FORM, b"q="), (MULTIPART, b'--xXx\r\nContent-Disposition: form-data; '
                                                                b'name="q"\r\n\r\n'), ("application/json", b'{"q":"')])
def test_chunked_bodies_are_refused_while_they_stream(translator, kind, head):
    # 160 chunks of 64 KiB (10 MiB) without Content-Length; the limit is 4 x 400 x 8 + 64 KiB = 78,336 bytes
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", "/translate", content_type=kind,
                                                               chunks=chunks_of(b"x" * 65536, 160, head)))
    assert out.status == 413 and "request body is over 78336 bytes" in out.body["error"], out
    assert out.pulled <= 3  # refused at the limit, never read whole (a form was read to its end: 161 chunks)


def test_a_file_part_is_refused_and_never_spooled(translator, monkeypatch):
    import tempfile

    def no_spool(*args, **kwargs):
        raise AssertionError("an upload was spooled to a temporary file")

    monkeypatch.setattr(tempfile, "SpooledTemporaryFile", no_spool)
    monkeypatch.setattr("starlette.formparsers.SpooledTemporaryFile", no_spool)
    out = run_service(translator, settings(), lambda app: asgi(
        app, "POST", "/translate", multipart(("q", b"Hello")), content_type=MULTIPART.replace("xXx", "yYy")))
    assert out.status == 400 and "form data" in out.body["error"]  # the wrong boundary: no parts
    out = run_service(translator, settings(), lambda app: asgi(
        app, "POST", "/translate", multipart(("q", b"Hello"), filename="a.txt"), content_type=MULTIPART))
    assert out.status == 400 and out.body == {"error": "'q' must be text, not a file upload"}, out


@pytest.mark.parametrize("body", [b"[" * 100_000, b'{"q": ' + b"[" * 50_000 + b"]" * 50_000 + b"}",
                                  b'{"q": "Hi", "x": ' + b'{"a":' * 30_000 + b"1" + b"}" * 30_000 + b"}"])
def test_deep_json_is_400(translator, body):
    for path in ("/translate", "/detect", "/attention"):
        out = run_service(translator, settings(max_chars=400_000), lambda app, path=path: asgi(
            app, "POST", path, body, content_type="application/json"))
        assert out.status == 400 and "nested too deep" in out.body["error"], (path, out)


# --- cross-site requests, Host headers ------------------------------------------------------------------------

def test_only_json_and_form_bodies_are_read(translator):
    body = json.dumps({"q": "Hi"}).encode()
    cases = [("text/plain", body, 415), ("application/xml", body, 415), ("text/plain;charset=UTF-8", body, 415),
             (None, body, 415), ("application/json; charset=utf-8", body, 200), (None, b"", 400)]

    async def scenario(app):
        return [(await asgi(app, "POST", "/translate", data, content_type=kind)) for kind, data, _ in cases]

    out = run_service(translator, settings(), scenario)
    assert [a.status for a in out] == [status for *_, status in cases], [a.body for a in out]
    assert "application/json" in out[0].body["error"] and "missing q" in out[-1].body["error"]
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", "/translate?q=Hi"))  # no body at all
    assert out.status == 200


@pytest.mark.parametrize("host,allowed,status", [
    ("evil.example", (), 421), ("evil.example:5000", (), 421), ("localhost.evil.example", (), 421),
    ("localhost:5000", (), 200), ("127.0.0.1:5000", (), 200), ("[::1]:5000", (), 200), ("192.168.1.20:5000", (), 200),
    ("translate.example.org", ("translate.example.org",), 200),
    ("Translate.Example.org.:80", ("translate.example.org",), 200), ("evil.example", ("*",), 200),
])
def test_the_host_header_must_name_this_server(translator, host, allowed, status):
    out = run_service(translator, settings(allowed_hosts=allowed), lambda app: asgi(app, "GET", "/health",
                                                                                    headers={"host": host}))
    assert out.status == status, out
    if status == 421:
        assert "--allowed-host" in out.body["error"]


# --- silent decoding and leaks ------------------------------------------------------------------------------------

@pytest.mark.parametrize("path,body,kind", [
    ("/translate", b"q=%ff%fe", FORM), ("/translate", b"q=\xff\xfe", FORM), ("/detect", b"q=%ff%fe", FORM),
    ("/translate", multipart(("q", b"\xff\xfe")), MULTIPART), ("/translate?q=%ff%fe", b"", FORM),
])
def test_invalid_utf8_in_forms_and_the_query_is_refused(translator, path, body, kind):
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", path, body, content_type=kind))
    assert out.status == 400 and "UTF-8" in out.body["error"], out


def test_a_beam_of_superscript_two_gets_our_message(translator):
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", "/translate", json.dumps(
        {"q": "Hi", "beam": "²"}).encode(), content_type="application/json"))
    assert out.status == 400 and out.body == {"error": "beam must be a whole number from 1 to 16, got '²'"}


def test_too_many_alternatives_are_named_in_the_requests_words(translator):
    """Issue 42: `alternatives: 15` at the default beam was reported as `--n-best 16`, a flag nobody gave. Issue 43:
    the options' own check says it (a pick of the server's options), in the request's words."""
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", "/translate", json.dumps(
        {"q": "Hi", "alternatives": 15}).encode(), content_type="application/json"))
    assert out.status == 400 and out.body["error"] == ('"alternatives": 15: beam search keeps only 4 hypotheses '
                                                      "(beam 4, this server's default); give a beam of at least 16")
    out = run_service(translator, settings(), lambda app: asgi(app, "POST", "/translate", json.dumps(
        {"q": "Hi", "alternatives": 3, "beam": 2}).encode(), content_type="application/json"))
    assert out.status == 400 and out.body["error"].startswith('"alternatives": 3: beam search keeps only 2 hypotheses '
                                                              '("beam": 2)'), out


# --- wrong-language input: a JSON field LibreTranslate clients ignore, and a log line; source "auto" -------------

def post(body):
    return lambda app: asgi(app, "POST", "/translate", json.dumps(body).encode(), content_type="application/json")


def test_a_chinese_request_to_an_en_zh_server_gets_a_warning_field_and_a_log_line(translator, caplog):
    with caplog.at_level("WARNING", logger="scratchformer.serve"):
        out = run_service(translator, settings(), post({"q": "我 爱 中国", "source": "en", "target": "zh"}))
    assert out.status == 200 and isinstance(out.body["translatedText"], str)  # still translated: a client goes on
    assert out.body["warning"].startswith("the input looks like Chinese, but this model translates en->zh")
    assert [r.getMessage() for r in caplog.records] == [f"scratchformer serve: a /translate request: "
                                                        f"{out.body['warning']}"]
    caplog.clear()
    out = run_service(translator, settings(), post({"q": ["Open the file.", "Bonjour le monde"], "source": "en"}))
    assert out.status == 200 and out.body["warning"].startswith("1 of 2 inputs are not English (first: #2, which "
                                                                "looks like French)")
    caplog.clear()
    out = run_service(translator, settings(), post({"q": ["Open the file.", "", "OK"]}))
    assert out.status == 200 and "warning" not in out.body and not caplog.records  # English, empty, too short


def test_source_auto_translates_english_and_refuses_the_rest(translator):
    """Issue 44: source "auto" was told every text is English (confidence 100). Now English is translated with
    the detector's confidence, and another language is a 400, as LibreTranslate answers a pair it lacks."""
    out = run_service(translator, settings(), post({"q": ["Open the file in a new window.", "OK"],
                                                    "source": "auto", "target": "zh"}))
    assert out.status == 200, out
    first, short = out.body["detectedLanguage"]
    assert first["language"] == "en" and 50 < first["confidence"] <= 100
    assert short["language"] == "en" and short["confidence"] < 50  # too short to tell: taken as the source
    for q, name in (("Bonjour, je voudrais ouvrir ce fichier.", "French (fr"), ("我 爱 中国", "Chinese (zh")):
        out = run_service(translator, settings(), post({"q": q, "source": "auto", "target": "zh"}))
        assert out.status == 400 and out.body["error"].startswith(f"source auto: q looks like {name}"), out
        assert "translates only en->zh" in out.body["error"]


# --- over real HTTP: the key from the command line, the Host check in uvicorn -------------------------------------

def test_over_http_a_non_ascii_key_from_the_command_line_and_the_host_check(tiny_run):
    import http.client

    from .conftest import request, start_server

    server = start_server(tiny_run, "--source", "en", "--target", "zh", "--api-key", "密钥", "--allowed-host",
                          "translate.example.org")
    host, port = server.url.removeprefix("http://").rsplit(":", 1)

    def post(body: bytes, kind: str, host_header: str | None = None) -> tuple[int, dict]:
        conn = http.client.HTTPConnection(host, int(port), timeout=120)
        try:
            conn.request("POST", "/translate", body, {"Content-Type": kind, **({"Host": host_header}
                                                                               if host_header else {})})
            response = conn.getresponse()
            return response.status, json.loads(response.read())
        finally:
            conn.close()

    try:
        assert request(server.url, "/translate", {"q": "Hello", "api_key": "密钥"})[0] == 200  # was 500
        assert request(server.url, "/translate", {"q": "Hello", "api_key": "é"})[:2] == (
            403, {"error": "Invalid API key"})
        assert post(b"q=Hello&api_key=%E5%AF%86%E9%92%A5", FORM)[0] == 200
        assert post(b"q=Hello&api_key=%C3%A9", FORM)[0] == 403
        good = json.dumps({"q": "Hello", "api_key": "密钥"}).encode()
        assert post(good, "application/json", f"localhost:{port}")[0] == 200
        assert post(good, "application/json", "translate.example.org")[0] == 200
        status, out = post(good, "application/json", f"rebind.evil.example:{port}")
        assert status == 421 and "--allowed-host rebind.evil.example" in out["error"]
        assert post(good, "text/plain")[0] == 415
        status, health, _ = request(server.url, "/health")
        assert status == 200 and health["run"] == tiny_run.name and str(tiny_run) not in json.dumps(health)
    finally:
        assert server.stop() == 0
    assert "Traceback" not in "".join(server.stderr)

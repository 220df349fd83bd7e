"""A property of the service (issue 35): any JSON document, form or multipart body, chunked or not, under any content
type, posted to /translate, /detect or /attention gets 200, a 4xx or 408, never a 5xx (nor an exception out of the
app); and an ordinary request right after gets its normal answer. In-process (conftest.asgi) on the tiny run, one
app and one event loop for every example, so a hundred examples take seconds."""

from __future__ import annotations

import asyncio
import json
import threading
import urllib.parse

import pytest
from hypothesis import HealthCheck, event, given, settings
from hypothesis import strategies as st

from scratchformer.runs import load_run
from scratchformer.serve import Settings, create_app
from scratchformer.serve.decoder import RunTranslator

from .conftest import asgi

PATHS = ("/translate", "/detect", "/attention")
FIELDS = ("q", "source", "target", "beam", "alternatives", "format", "api_key", "translation")
KEY = "s3cret"  # the server wants a key: the requests below carry it mostly, and sometimes another one
ORDINARY = json.dumps({"q": "Print it.", "source": "en", "target": "zh", "beam": 1, "api_key": KEY}).encode()


class Service:
    """The app on an event loop of its own thread: call(coro) runs a coroutine there and returns its result."""

    def __init__(self, tiny_run) -> None:
        self.loop = asyncio.new_event_loop()
        threading.Thread(target=self.loop.run_forever, daemon=True).start()
        limits = Settings("en", "zh", max_chars=200, max_sentences=6, max_beam=4, beam=2, batch_wait_ms=0,
                          api_key=KEY)
        self.app = create_app(RunTranslator(load_run(tiny_run)), limits)
        self.call(self.app.state.batcher.start())

    def call(self, coro):
        return asyncio.run_coroutine_threadsafe(coro, self.loop).result(300)

    def close(self) -> None:
        self.call(self.app.state.batcher.stop())
        self.loop.call_soon_threadsafe(self.loop.stop)


@pytest.fixture(scope="module")
def service(tiny_run):
    s = Service(tiny_run)
    s.normal = s.call(asgi(s.app, "POST", "/translate", ORDINARY, content_type="application/json"))
    assert s.normal.status == 200
    yield s
    s.close()


text = st.text(max_size=12) | st.sampled_from(["Hello.", "en", "zh", "auto", "1", "²", "-3", "text", "é", ""])
scalars = st.none() | st.booleans() | st.integers(-5, 20) | st.floats(allow_nan=True) | text
json_values = st.recursive(scalars, lambda inner: st.lists(inner, max_size=4) | st.dictionaries(text, inner,
                                                                                                  max_size=3),
                           max_leaves=12)
keys = st.sampled_from([KEY, KEY, KEY, "é", "密钥", "\ud800", None]) | json_values
requests_json = st.builds(lambda fields, key: {**fields, "api_key": key} if key is not None else fields,
                          st.dictionaries(st.sampled_from(FIELDS), json_values | st.lists(text, max_size=7),
                                          max_size=6), keys)
deep = st.integers(1, 5000).map(lambda n: b'{"q": ' + b"[" * n + b"]" * n + b"}") | st.integers(1, 5000).map(
    lambda n: b'{"a":' * n + b"1" + b"}" * n)
documents = (requests_json | json_values).map(lambda v: json.dumps(v).encode()) | st.binary(max_size=64) | deep
pairs = st.lists(st.tuples(st.sampled_from(FIELDS) | text, text | st.sampled_from(["%ff", "%C3%A9", "%", "&", "="])),
                 max_size=6).map(lambda ps: [("api_key", KEY), *ps])
forms = pairs.map(lambda ps: "&".join(f"{urllib.parse.quote(k)}={v if v.startswith('%') else urllib.parse.quote(v)}"
                                      for k, v in ps).encode()) | st.binary(max_size=64)


def multipart_body(parts: list[tuple[str, bytes, bool]]) -> bytes:
    out = b""
    for name, value, is_file in parts:
        extra = '; filename="f.txt"' if is_file else ""
        out += (f'--bNd\r\nContent-Disposition: form-data; name="{name}"{extra}\r\n\r\n'.encode("utf-8",
                                                                                                "surrogatepass")
                + value + b"\r\n")
    return out + b"--bNd--\r\n"


multiparts = st.lists(st.tuples(st.sampled_from(FIELDS) | text, st.binary(max_size=24) | text.map(str.encode),
                                st.booleans()), max_size=4).map(multipart_body) | st.binary(max_size=64)
KINDS = ["application/json", "application/x-www-form-urlencoded", "multipart/form-data; boundary=bNd",
         "multipart/form-data", "text/plain", "application/xml", None, "application/json; charset=latin-1"]
bodies = st.one_of(st.tuples(st.just("application/json"), documents),
                   st.tuples(st.just("application/x-www-form-urlencoded"), forms),
                   st.tuples(st.just("multipart/form-data; boundary=bNd"), multiparts),
                   st.tuples(st.sampled_from(KINDS), documents | forms | multiparts))


def in_chunks(body: bytes, cuts: list[int]):
    at = 0
    for cut in sorted(c % (len(body) + 1) for c in cuts):
        yield body[at:cut]
        at = cut
    yield body[at:]


@settings(max_examples=120, deadline=None, database=None, suppress_health_check=[HealthCheck.function_scoped_fixture,
                                                                                   HealthCheck.too_slow])
@given(path=st.sampled_from(PATHS), body=bodies, chunked=st.booleans(), cuts=st.lists(st.integers(0, 10**6),
                                                                                       max_size=4),
       query=st.sampled_from(["", "?q=Hi", "?beam=9", "?q=%ff"]))
def test_any_body_gets_200_4xx_or_408_and_the_service_goes_on(service, path, body, chunked, cuts, query):
    kind, data = body
    if chunked:
        out = service.call(asgi(service.app, "POST", path + query, content_type=kind, chunks=in_chunks(data, cuts)))
    else:
        out = service.call(asgi(service.app, "POST", path + query, data, content_type=kind))
    event(f"status {out.status}")  # --hypothesis-show-statistics: how many got through to the decoder
    assert out.status == 200 or 400 <= out.status < 500, (out.status, out.body, kind, data)
    if out.status != 200:
        assert isinstance(out.body, dict) and set(out.body) == {"error"} and "\n" not in out.body["error"], out.body
    after = service.call(asgi(service.app, "POST", "/translate", ORDINARY, content_type="application/json"))
    assert (after.status, after.body) == (service.normal.status, service.normal.body)

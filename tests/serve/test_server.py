"""`scratchformer serve` over real HTTP: every endpoint, the CLI's own text for the same options, LibreTranslate's
JSON and form requests, concurrent clients each getting their own results in order, and every bad request as a
4xx {"error": one line}."""

from __future__ import annotations

import re
import threading
import urllib.parse

import pytest

from .conftest import TEXTS, cli_lines, request, start_server


@pytest.fixture(scope="module")
def server(tiny_run):
    s = start_server(tiny_run, "--source", "en", "--target", "zh", "--set", "max_sentences=8", "--set", "max_chars=400",
                     "--set", "batch_wait_ms=20")
    yield s
    assert s.stop() == 0


@pytest.fixture(scope="module")
def reference(tiny_run):
    """The CLI's translation of every TEXTS sentence, beam 4 (the server's default) and greedy."""
    return {beam: dict(zip(TEXTS, cli_lines(str(tiny_run), "--beam", str(beam), *TEXTS))) for beam in (1, 4)}


def test_health_languages_page_and_font(server):
    status, health, _ = request(server.url, "/health")
    assert status == 200 and health["status"] == "ok" and health["engine"] == "torch"
    status, langs, _ = request(server.url, "/languages")
    assert status == 200 and langs[0] == {"code": "en", "name": "English", "targets": ["zh"]}
    assert {"code": "zh", "name": "Chinese", "targets": []} in langs
    status, page, kind = request(server.url, "/")
    assert status == 200 and kind.startswith("text/html") and "<canvas" in page and 'id="go"' in page
    assert not re.search(r"""(src|href)\s*=\s*["']?(https?:)?//""", page) and "url(http" not in page  # no CDN
    status, _, kind = request(server.url, "/font.otf")
    assert status == 404 or (status == 200 and kind == "font/otf")


def test_translate_equals_the_cli(server, reference, tiny_run):
    status, out, _ = request(server.url, "/translate", {"q": TEXTS[0], "source": "en", "target": "zh"})
    assert status == 200 and out == {"translatedText": reference[4][TEXTS[0]]}
    status, out, _ = request(server.url, "/translate", {"q": TEXTS, "source": "en", "target": "zh", "beam": 1})
    assert status == 200 and out["translatedText"] == [reference[1][t] for t in TEXTS]
    status, out, _ = request(server.url, "/translate", {"q": ["", TEXTS[2]], "source": "en", "target": "zh"})
    assert status == 200 and out["translatedText"] == ["", reference[4][TEXTS[2]]]  # an empty line: empty output
    lines = cli_lines(str(tiny_run), "--beam", "4", "--n-best", "3", TEXTS[1], TEXTS[3])
    status, out, _ = request(server.url, "/translate", {"q": [TEXTS[1], TEXTS[3]], "source": "en", "target": "zh",
                                                        "alternatives": 2})
    assert status == 200
    served = [(text, score) for best, alts, scores in zip(out["translatedText"], out["alternatives"], out["scores"])
              for text, score in zip([best, *alts], scores)]
    printed = [(text, float(score)) for text, score in (line.rsplit("\t", 1) for line in lines)]
    # the n-best lists as `translate --n-best 3` prints them: the same texts, the scores to float noise (the two
    # processes may measure different weight layouts, so different kernels: never compared bit for bit)
    assert [t for t, _ in served] == [t for t, _ in printed]
    assert served == [(t, pytest.approx(s, abs=1e-4)) for t, s in printed]


def test_form_posts_and_auto_source(server, reference):
    data = b"q=Print+it.&source=en&target=zh&beam=1"
    status, out, _ = request(server.url, "/translate", data=data, content_type="application/x-www-form-urlencoded")
    assert status == 200 and out == {"translatedText": reference[1]["Print it."]}
    boundary = "xXxBoundary"
    parts = [("q", TEXTS[4]), ("source", "auto"), ("target", "zh")]
    body = "".join(f'--{boundary}\r\nContent-Disposition: form-data; name="{k}"\r\n\r\n{v}\r\n' for k, v in parts)
    status, out, _ = request(server.url, "/translate", data=f"{body}--{boundary}--\r\n".encode(),
                             content_type=f"multipart/form-data; boundary={boundary}")
    assert status == 200 and out["translatedText"] == reference[4][TEXTS[4]]
    found = out["detectedLanguage"]  # "Quit?": too short to be sure, so taken as the server's source
    assert found["language"] == "en" and 0 <= found["confidence"] <= 100
    params = urllib.parse.urlencode({"q": TEXTS[6], "source": "en", "target": "zh"})
    status, out, _ = request(server.url, "/translate", data=params.encode())  # libretranslatepy: urllib's default
    assert status == 200 and out == {"translatedText": reference[4][TEXTS[6]]}  # form content type
    status, out, _ = request(server.url, f"/translate?{params}", data=b"")  # the fields in the query string
    assert status == 200 and out == {"translatedText": reference[4][TEXTS[6]]}
    status, out, _ = request(server.url, "/detect", {"q": "Open the file in a new window."})
    assert status == 200 and out[0]["language"] == "en" and 50 < out[0]["confidence"] <= 100, out


def test_concurrent_clients_get_their_own_results_in_order(server, reference):
    jobs = [[TEXTS[(i + k * 3) % len(TEXTS)] for k in range(1 + i % 4)] for i in range(12)]  # different lists
    answers: dict[int, tuple] = {}

    def client(i: int) -> None:
        answers[i] = request(server.url, "/translate", {"q": jobs[i], "source": "en", "target": "zh"})[:2]

    threads = [threading.Thread(target=client, args=(i,)) for i in range(len(jobs))]
    for t in threads:
        t.start()
    for t in threads:
        t.join()
    for i, texts in enumerate(jobs):
        assert answers[i] == (200, {"translatedText": [reference[4][t] for t in texts]}), i


def test_attention_endpoint(server, reference):
    translation = reference[4][TEXTS[0]]
    status, out, _ = request(server.url, "/attention", {"q": TEXTS[0], "translation": translation})
    assert status == 200 and out["source_tokens"][-1] == "</s>" and out["target_tokens"][-1] == "</s>"
    assert len(out["source_tokens"]) == len(TEXTS[0]) + 1 and len(out["weights"]) == len(out["target_tokens"])
    for row in out["weights"]:  # a softmax over the source per target token
        assert len(row) == len(out["source_tokens"]) and abs(sum(row) - 1) < 1e-2


def test_metrics_count_requests_and_batches(server):
    request(server.url, "/translate", {"q": [TEXTS[0], TEXTS[1]], "source": "en", "target": "zh", "beam": 1})
    status, text, kind = request(server.url, "/metrics")
    assert status == 200 and kind.startswith("text/plain")
    values = dict(re.findall(r"^(\S+) (\S+)$", text, re.M))
    assert int(values['scratchformer_serve_requests_total{path="/translate",code="200"}']) >= 1
    assert int(values["scratchformer_serve_sentences_total"]) >= 2
    assert int(values["scratchformer_serve_batch_sentences_count"]) >= 1
    assert values['scratchformer_serve_batch_sentences_bucket{le="+Inf"}'] == values[
        "scratchformer_serve_batch_sentences_count"]
    for q in ("0.5", "0.95", "0.99"):
        assert float(values[f'scratchformer_serve_latency_seconds{{quantile="{q}"}}']) > 0


BAD = [  # (body or raw bytes, content type, status, words in the error)
    (b'{"q": "Hello", ', "application/json", 400, "malformed JSON"),
    (b'["Hello"]', "application/json", 400, "must be an object"),
    (b"\xff\xfe{", "application/json", 400, "malformed JSON"),
    (b'{"q": "' + b"x" * 100_000 + b'"}', "application/json", 413, "request body"),
    (b"q=%ZZ&source=en", "multipart/form-data; boundary=nothing", 400, "form data"),
    ({"source": "en", "target": "zh"}, None, 400, "missing q"),
    ({"q": 7}, None, 400, "q must be a string"),
    ({"q": ["ok", None]}, None, 400, "NoneType"),
    ({"q": "Hello", "source": "en", "target": "de"}, None, 400, "en->de"),
    ({"q": "Hello", "source": "fr", "target": "zh"}, None, 400, "fr->zh"),
    ({"q": "Hello", "format": "html"}, None, 400, "plain text"),
    ({"q": "Hello", "beam": 0}, None, 400, "beam must be"),
    ({"q": "Hello", "beam": "wide"}, None, 400, "beam must be"),
    ({"q": "Hello", "beam": 2, "alternatives": 3}, None, 400, "beam"),
    ({"q": "Hello", "alternatives": -1}, None, 400, "alternatives"),
    ({"q": ["a"] * 9}, None, 413, "at most 8"),
    ({"q": "x" * 401}, None, 413, "at most 400"),
    ({"q": "\ud800"}, None, 400, "surrogate"),
    ({"q": "Hello", "translation": 3}, "/attention", 400, "both strings"),
]


@pytest.mark.parametrize("body,kind,status,words", BAD, ids=[f"{i}-{b[2]}" for i, b in enumerate(BAD)])
def test_bad_requests_are_4xx_json_lines(server, body, kind, status, words):
    path = kind if kind and kind.startswith("/") else "/translate"
    if isinstance(body, bytes):
        got, out, _ = request(server.url, path, data=body, content_type=kind)
    else:
        got, out, _ = request(server.url, path, body)
    assert got == status and set(out) == {"error"}, (got, out)
    assert words in out["error"] and "\n" not in out["error"] and "Traceback" not in out["error"]


def test_unknown_paths_and_methods(server):
    for path, method, status in (("/nothing", "GET", 404), ("/translate", "GET", 405), ("/health", "POST", 405)):
        got, out, _ = request(server.url, path, method=method, data=b"" if method == "POST" else None)
        assert got == status and set(out) == {"error"}
    status, health, _ = request(server.url, "/health")
    assert status == 200  # the server lives on

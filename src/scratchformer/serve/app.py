"""The HTTP face of the service (FastAPI): LibreTranslate's /translate, /languages and /detect, plus /health,
/metrics, /attention and the page at /. Every bad request is a 4xx `{"error": "..."}`, never a traceback.

    app = create_app(RunTranslator(load_run("models/en-zh")), Settings("en", "zh"))
    uvicorn.run(app)   # what `scratchformer serve` does, with a socket bound first (server.py)
"""

from __future__ import annotations

import asyncio
import contextlib
import hmac
import importlib.resources
import importlib.util
import json
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from scratchformer.serve.batcher import Batcher
from scratchformer.serve.decoder import ALIASES, LANGUAGE_NAMES, Options, RunTranslator
from scratchformer.serve.metrics import Metrics

PATHS = ("/", "/translate", "/languages", "/detect", "/health", "/metrics", "/attention", "/font.otf")


@dataclass
class Settings:
    """The server-wide choices of `scratchformer serve` (its flags). beam: a request's default (None: the run's
    decoding options', set when the run is loaded)."""

    source: str
    target: str
    beam: int | None = None
    batch_wait_ms: float = 10.0
    max_batch_tokens: int = 4096
    max_chars: int = 5000
    max_sentences: int = 128
    max_beam: int = 16
    timeout: float = 60.0
    api_key: str | None = None


class ServeError(Exception):
    """A request we refuse: its HTTP status and the one line the client gets as {"error": ...}."""

    def __init__(self, status: int, message: str) -> None:
        super().__init__(message)
        self.status, self.message = status, message


def _error(status: int, message: str) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status)


async def request_fields(request: Request, body_limit: int) -> dict[str, Any]:
    """The request's fields: a JSON object, or form data (urlencoded or multipart) as LibreTranslate takes, with
    the query string's fields under them. A repeated form field (q=a&q=b) is a list."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > body_limit:
        raise ServeError(413, f"the request body is over {body_limit} bytes")
    kind = request.headers.get("content-type", "").split(";")[0].strip().lower()
    fields: dict[str, Any] = {}
    if kind in ("application/x-www-form-urlencoded", "multipart/form-data"):
        try:
            form = await request.form()
        except Exception as e:  # noqa: BLE001 (python-multipart's parse errors have no common base)
            raise ServeError(400, f"malformed form data: {e}") from None
        for name in form:
            values = form.getlist(name)
            if not all(isinstance(v, str) for v in values):
                raise ServeError(400, f"{name!r} must be text, not a file upload")
            fields[name] = values if len(values) > 1 else values[0]
    else:
        body = b""
        async for chunk in request.stream():  # a chunked body has no content-length: stop reading at the limit
            body += chunk
            if len(body) > body_limit:
                raise ServeError(413, f"the request body is over {body_limit} bytes")
        if body.strip():
            try:
                fields = json.loads(body)
            except (ValueError, UnicodeDecodeError) as e:
                raise ServeError(400, f"malformed JSON: {str(e).splitlines()[0]}") from None
            if not isinstance(fields, dict):
                raise ServeError(400, f"the JSON body must be an object such as {{\"q\": \"Hello\", \"source\": "
                                      f"\"en\", \"target\": \"zh\"}}, got a {type(fields).__name__}")
    return {**dict(request.query_params), **fields}


def _integer(fields: dict, name: str, default: int, low: int, high: int) -> int:
    value = fields.get(name, default)
    number = int(value) if isinstance(value, str) and value.strip().lstrip("-").isdigit() else value
    if isinstance(number, bool) or not isinstance(number, int) or not low <= number <= high:
        raise ServeError(400, f"{name} must be a whole number from {low} to {high}, got {value!r}")
    return number


def _texts(fields: dict, settings: Settings) -> tuple[list[str], bool]:
    """(the sentences of "q", whether q was one string); 400 / 413 for a missing, mistyped or oversized q."""
    q = fields.get("q")
    if q is None:
        raise ServeError(400, "Invalid request: missing q parameter")
    single = isinstance(q, str)
    texts = [q] if single else q
    if not isinstance(texts, list) or not all(isinstance(t, str) for t in texts):
        raise ServeError(400, f"q must be a string or a list of strings, got {type(q).__name__}"
                         + (" holding " + ", ".join(sorted({type(t).__name__ for t in texts if not isinstance(t, str)}))
                            if isinstance(texts, list) else ""))
    if len(texts) > settings.max_sentences:
        raise ServeError(413, f"{len(texts)} sentences: this server takes at most {settings.max_sentences} per "
                              "request (--max-sentences)")
    chars = sum(map(len, texts))
    if chars > settings.max_chars:
        raise ServeError(413, f"{chars} characters: this server takes at most {settings.max_chars} per request "
                              "(--max-chars)")
    for i, t in enumerate(texts):
        try:
            t.encode("utf-8")
        except UnicodeEncodeError as e:
            raise ServeError(400, f"q[{i}] holds a lone surrogate (\\u{ord(t[e.start]):04x}): send valid "
                                  "UTF-8 text") from None
    return texts, single


def _language(fields: dict, name: str, expected: str) -> str:
    code = fields.get(name, expected)
    if not isinstance(code, str):
        raise ServeError(400, f"{name} must be a language code such as {expected!r}, got {type(code).__name__}")
    code = code.strip().lower()
    return ALIASES.get(code, code)


def _font_file() -> Path | None:
    """A font with Chinese glyphs for the page (the Noto Sans SC that `pylopdf-fonts-zh-cn` ships), if installed."""
    spec = importlib.util.find_spec("pylopdf_fonts_zh_cn")
    path = Path(spec.origin).parent / "NotoSansSC-Regular.otf" if spec and spec.origin else None
    return path if path is not None and path.is_file() else None


def create_app(translator: RunTranslator, settings: Settings) -> FastAPI:
    """The service for one loaded run; the batcher starts and stops with the app's lifespan."""
    metrics = Metrics()
    batcher = Batcher(translator.translate, translator.count_tokens, settings.batch_wait_ms,
                      settings.max_batch_tokens, metrics)
    body_limit = 4 * settings.max_chars * settings.max_sentences + 65536  # UTF-8 and JSON escapes, then refused

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="scratchformer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics, app.state.batcher = metrics, batcher

    @app.middleware("http")
    async def count(request: Request, call_next):
        path = request.url.path if request.url.path in PATHS else "other"
        metrics.in_flight += 1
        start, status = time.monotonic(), 500
        try:
            response = await call_next(request)
            status = response.status_code
            return response
        finally:
            metrics.in_flight -= 1
            metrics.request_done(path, status, time.monotonic() - start)

    def check_key(fields: dict) -> None:
        if settings.api_key is not None and not hmac.compare_digest(str(fields.get("api_key", "")),
                                                                     settings.api_key):
            raise ServeError(403, "Invalid API key")

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        fields = await request_fields(request, body_limit)
        check_key(fields)
        texts, single = _texts(fields, settings)
        source, target = _language(fields, "source", settings.source), _language(fields, "target", settings.target)
        auto = source == "auto"
        if (settings.source if auto else source, target) != (settings.source, settings.target):
            raise ServeError(400, f"{source}->{target} is not a language pair this server translates: it "
                                  f"translates {settings.source}->{settings.target}")
        if fields.get("format", "text") != "text":
            raise ServeError(400, f"format {fields.get('format')!r}: this server translates plain text only "
                                  "(format \"text\")")
        beam = _integer(fields, "beam", settings.beam, 1, settings.max_beam)
        alternatives = _integer(fields, "alternatives", 0, 0, settings.max_beam - 1)
        options = Options(beam, alternatives + 1)
        translator.check(options)  # ScratchformerError -> 400 (the handler below)
        try:
            hyps = await asyncio.wait_for(batcher.submit(texts, options), settings.timeout)
        except asyncio.TimeoutError:
            raise ServeError(408, f"the translation took longer than this server's --timeout of "
                                  f"{settings.timeout:g} s: send fewer or shorter sentences") from None
        best = [h[0][0] for h in hyps]
        out: dict[str, Any] = {"translatedText": best[0] if single else best}
        if alternatives:
            alts = [[text for text, _ in h[1:]] for h in hyps]
            scores = [[score for _, score in h] for h in hyps]
            out |= {"alternatives": alts[0] if single else alts, "scores": scores[0] if single else scores}
        if auto:
            detected = {"confidence": 100.0, "language": settings.source}
            out["detectedLanguage"] = detected if single else [detected] * len(texts)
        return JSONResponse(out)

    @app.post("/detect")
    async def detect(request: Request) -> JSONResponse:
        """LibreTranslate's language detection: a one-pair server knows its source language."""
        fields = await request_fields(request, body_limit)
        check_key(fields)
        _texts(fields, settings)
        return JSONResponse([{"confidence": 100.0, "language": settings.source}])

    @app.get("/languages")
    async def languages() -> JSONResponse:
        return JSONResponse([{"code": settings.source, "name": LANGUAGE_NAMES.get(settings.source, settings.source),
                              "targets": [settings.target]},
                             {"code": settings.target, "name": LANGUAGE_NAMES.get(settings.target, settings.target),
                              "targets": []}])

    @app.get("/health")
    async def health() -> JSONResponse:
        return JSONResponse({"status": "ok", "run": str(translator.run.path), "engine": translator.engine,
                             "queued_sentences": metrics.queued_sentences})

    @app.get("/metrics")
    async def prometheus() -> PlainTextResponse:
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/attention")
    async def attention(request: Request) -> JSONResponse:
        """{"q": source, "translation": its translation} -> the cross-attention heatmap's numbers."""
        fields = await request_fields(request, body_limit)
        check_key(fields)
        source, translation = fields.get("q"), fields.get("translation")
        if not isinstance(source, str) or not isinstance(translation, str):
            raise ServeError(400, 'give {"q": the source sentence, "translation": its translation}, both strings')
        _texts({"q": [source, translation]}, settings)  # the size limits
        try:
            found = await asyncio.wait_for(batcher.run_exclusive(translator.attention, source, translation),
                                           settings.timeout)
        except asyncio.TimeoutError:
            raise ServeError(408, f"the attention took longer than --timeout {settings.timeout:g} s") from None
        return JSONResponse(found)

    @app.get("/", response_class=HTMLResponse)
    async def page() -> HTMLResponse:
        return HTMLResponse(importlib.resources.files("scratchformer.serve").joinpath("page.html")
                            .read_text(encoding="utf-8"))

    @app.get("/font.otf")
    async def font() -> FileResponse:
        path = _font_file()
        if path is None:
            raise ServeError(404, "no Chinese font installed (pip install pylopdf-fonts-zh-cn); the page falls back "
                                  "to the browser's fonts")
        return FileResponse(path, media_type="font/otf", headers={"Cache-Control": "max-age=86400"})

    _install_error_handlers(app)
    return app


def _install_error_handlers(app: FastAPI) -> None:
    """Every failure as {"error": one line}: ours, FastAPI's validation, Starlette's 404 / 405, our checks'."""
    app.add_exception_handler(ServeError, lambda r, e: _error(e.status, e.message))
    app.add_exception_handler(RequestValidationError, lambda r, e: _error(400, f"invalid request: {e.errors()}"))
    app.add_exception_handler(HTTPException, lambda r, e: _error(e.status_code, str(e.detail)))
    app.add_exception_handler(ValueError, lambda r, e: _error(400, str(e).splitlines()[0] if str(e) else repr(e)))
    app.add_exception_handler(MemoryError, lambda r, e: _error(413, "out of memory: send fewer or shorter "
                                                                    "sentences, or a smaller beam"))

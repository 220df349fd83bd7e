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
import ipaddress
import logging
import re
import time
from dataclasses import dataclass
from pathlib import Path
from typing import Any

from fastapi import FastAPI, Request
from fastapi.exceptions import RequestValidationError
from fastapi.responses import FileResponse, HTMLResponse, JSONResponse, PlainTextResponse
from starlette.exceptions import HTTPException

from scratchformer.config.budget import output_budget
from scratchformer.data.language import CONFIDENT, LANGUAGE_NAMES, detect, wrong_pair
from scratchformer.decoding.cancel import Cancelled
from scratchformer.decoding.sentences import split_sentences
from scratchformer.serve.batcher import Batcher
from scratchformer.serve.bodies import CLIENT_LEFT, SHUTTING_DOWN, ServeError, request_fields
from scratchformer.serve.decoder import ALIASES, Options, RunTranslator
from scratchformer.serve.metrics import Metrics

LOG = logging.getLogger("scratchformer.serve")  # no handler of ours: Python's last resort prints warnings to stderr
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
    max_cost: int = 200_000  # decoding row-steps a request may cost at most (request_cost); see `--set max_cost`
    slice_cost: int = 8192  # row-steps per decoding call of a long request (batcher.py): ~32 sentences at beam 4
    host: str = "127.0.0.1"  # the address the server is bound to: a Host header naming it is this server
    allowed_hosts: tuple[str, ...] = ()  # more names clients may reach it by (--allowed-host; "*": any)
    header_timeout: float = 10.0  # seconds a connection may take to send a request's headers (protocol.py)
    body_timeout: float = 30.0  # seconds a request's body may take once its headers are in (more: 408)
    keep_alive_timeout: float = 5.0  # seconds an idle connection is kept open after an answer
    max_connections: int = 512  # connections served at once (more: 503); fewer if the open-files limit is low


def _error(status: int, message: str, close: bool = False) -> JSONResponse:
    return JSONResponse({"error": message}, status_code=status, headers={"Connection": "close"} if close else None)


def _refused(request: Request, e: ServeError) -> JSONResponse:
    if e.status == CLIENT_LEFT:  # nobody reads the answer; one line in the log, never a traceback
        LOG.warning("scratchformer serve: %s %s: %s", request.method, request.url.path, e.message)
    return _error(e.status, e.message, e.close)


def _integer(fields: dict, name: str, default: int, low: int, high: int) -> int:
    value = fields.get(name, default)
    # ASCII digits only: str.isdigit() takes "²", which int() refuses with its own message
    number = int(value) if isinstance(value, str) and re.fullmatch(r"\s*-?[0-9]{1,9}\s*", value) else value
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
                              "request (max_sentences)")
    chars = sum(map(len, texts))
    if chars > settings.max_chars:
        raise ServeError(413, f"{chars} characters: this server takes at most {settings.max_chars} per request "
                              "(max_chars)")
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


def text_costs(translator: RunTranslator, texts: list[str], beam: int) -> list[int]:
    """Per text, the most decoding row-steps it can take at `beam`: request_cost's terms."""
    cap = translator.run.model.config.max_positions
    split = translator.options.split_sentences
    owners = [(i, p) for i, t in enumerate(texts) for p in (split_sentences(t) if split else [t]) if p.strip()]
    costs = [0] * len(texts)
    if not owners:
        return costs
    budget = translator.options.max_output_len
    for (i, _), ids in zip(owners, translator.run.src_tok.encode_batch([p for _, p in owners])):
        n = min(len(ids) + 1, cap)  # with </s>
        costs[i] += beam * output_budget(n, budget, cap)
    return costs


def request_cost(translator: RunTranslator, texts: list[str], beam: int) -> int:
    """The most decoding row-steps `texts` can take at `beam`: beam x the sum, over the sentences the decoder will
    see (each text split into sentences as the run's decoding.json says), of each one's output budget (the
    server's max_output_len, else its source tokens + 50, never above the model's max_len). Alternatives cost nothing
    more: an n-best list comes out of the same beams. At the shipped defaults (128 sentences, 5,000 characters,
    beam 16) the worst text is ~1,660 three-character sentences ("A. B. C. ..." split), i.e. 16 x 1,660 x 53
    ~ 1.4 million row-steps (minutes on one core); max_cost (200,000) refuses it up front."""
    return sum(text_costs(translator, texts, beam))


def _detected(text: str, source: str, auto: bool) -> dict[str, Any]:
    """LibreTranslate's {"confidence": 0-100, "language": code} for `text`: data/language.py's detection; the
    server's `source` for a text without letters, and with `auto` (a /translate with source "auto") for one too
    unsure to tell (below data.language.CONFIDENT), with its real confidence."""
    code, confidence = detect(text)
    if code is None or (auto and confidence < CONFIDENT):
        code = source
    return {"confidence": round(100 * confidence, 1), "language": code}


LOOPBACK_NAMES = ("localhost", "127.0.0.1", "::1")


def host_allowed(header: str | None, settings: Settings) -> bool:
    """Whether a Host header names this server, as local dev servers check it against DNS rebinding: an IP
    address (a rebinding page always comes by a name), localhost, the bound host, or an --allowed-host."""
    if header is None or "*" in settings.allowed_hosts:  # HTTP/1.0 without Host: no browser sends that
        return True
    name = header.strip().lower()
    name = name[1:name.find("]")] if name.startswith("[") and "]" in name else name.rsplit(":", 1)[0] \
        if name.count(":") == 1 else name
    name = name.rstrip(".")
    with contextlib.suppress(ValueError):
        ipaddress.ip_address(name)
        return True
    known = {*LOOPBACK_NAMES, settings.host.lower().strip("[]"), *(h.lower().strip("[]") for h in
                                                                   settings.allowed_hosts)}
    return name in known


def key_matches(given: object, key: str) -> bool:
    """The request's api_key against --api-key, compared as UTF-8 bytes in constant time (hmac.compare_digest
    raises on non-ASCII str); a key that is not a string never matches."""
    if not isinstance(given, str):
        return False
    return hmac.compare_digest(given.encode("utf-8", "surrogatepass"), key.encode("utf-8", "surrogatepass"))


def _font_file() -> Path | None:
    """A font with Chinese glyphs for the page (the Noto Sans SC that `pylopdf-fonts-zh-cn` ships), if installed."""
    spec = importlib.util.find_spec("pylopdf_fonts_zh_cn")
    path = Path(spec.origin).parent / "NotoSansSC-Regular.otf" if spec and spec.origin else None
    return path if path is not None and path.is_file() else None


def create_app(translator: RunTranslator, settings: Settings) -> FastAPI:
    """The service for one loaded run; the batcher starts and stops with the app's lifespan. A request's default
    beam is settings.beam, else the run's own (its decoding.json, through the Translator's options)."""
    if settings.beam is None:
        settings.beam = translator.options.beam
    detect("Load the language detector.")  # its model loads now (a second or two), not on a request's event loop
    metrics = Metrics()
    batcher = Batcher(translator.translate, translator.count_tokens, settings.batch_wait_ms,
                      settings.max_batch_tokens, metrics, settings.slice_cost)
    body_limit = 4 * settings.max_chars * settings.max_sentences + 65536  # UTF-8 and JSON escapes, then refused

    stopping = asyncio.Event()  # set by SIGTERM (begin_shutdown): bodies still arriving get 503 at once

    @contextlib.asynccontextmanager
    async def lifespan(app: FastAPI):
        app.state.loop = asyncio.get_running_loop()
        await batcher.start()
        yield
        await batcher.stop()

    app = FastAPI(title="scratchformer", lifespan=lifespan, docs_url=None, redoc_url=None, openapi_url=None)
    app.state.metrics, app.state.batcher, app.state.stopping, app.state.loop = metrics, batcher, stopping, None

    async def request_fields_of(request: Request) -> dict[str, Any]:
        return await request_fields(request, body_limit, settings.body_timeout, stopping)

    @app.middleware("http")
    async def count(request: Request, call_next):
        path = request.url.path if request.url.path in PATHS else "other"
        metrics.in_flight += 1
        start, status = time.monotonic(), 500
        try:
            host = request.headers.get("host")
            if not host_allowed(host, settings):  # DNS rebinding: a page of another site, by a name of its own
                response = _error(421, f"Host {host!r} is not a name of this server: reach it as localhost or by "
                                       f"its address, or start it with --allowed-host {host.rsplit(':', 1)[0]}")
            else:
                response = await call_next(request)
            status = response.status_code
            return response
        finally:
            metrics.in_flight -= 1
            metrics.request_done(path, status, time.monotonic() - start)

    def check_key(fields: dict, request: Request) -> None:
        """--api-key: the api_key field (LibreTranslate's), or an `Authorization: Bearer KEY` header."""
        if settings.api_key is None:
            return
        given = fields.get("api_key")
        auth = request.headers.get("authorization", "")
        if given is None and auth[:7].lower() == "bearer ":  # headers arrive as latin-1: back to their bytes
            given = auth[7:].strip().encode("latin-1").decode("utf-8", "replace")
        if not key_matches(given, settings.api_key):
            raise ServeError(403, "Invalid API key")

    @app.post("/translate")
    async def translate(request: Request) -> JSONResponse:
        fields = await request_fields_of(request)
        check_key(fields, request)
        texts, single = _texts(fields, settings)
        source, target = _language(fields, "source", settings.source), _language(fields, "target", settings.target)
        auto = source == "auto"
        detected = [_detected(t, settings.source, auto=True) for t in texts] if auto else []
        if (settings.source if auto else source, target) != (settings.source, settings.target):
            raise ServeError(400, f"{source}->{target} is not a language pair this server translates: it "
                                  f"translates {settings.source}->{settings.target}")
        for i, found in enumerate(detected):  # source "auto": what is not the server's source is refused
            if found["language"] != settings.source:
                raise ServeError(400, f"source auto: {'q' if single else f'q[{i}]'} looks like "
                                      f"{LANGUAGE_NAMES.get(found['language'], found['language'])} "
                                      f"({found['language']}, "
                                      f"{found['confidence']:.0f}% sure), and this server translates only "
                                      f"{settings.source}->{settings.target}")
        if fields.get("format", "text") != "text":
            raise ServeError(400, f"format {fields.get('format')!r}: this server translates plain text only "
                                  "(format \"text\")")
        beam = _integer(fields, "beam", settings.beam, 1, settings.max_beam)
        alternatives = _integer(fields, "alternatives", 0, 0, settings.max_beam - 1)
        words = (("beam", f'"beam": {beam}' if "beam" in fields else f"beam {beam}, this server's default"),
                 ("n_best", f'"alternatives": {alternatives}'))  # the options' check, in the request's words
        options = Options(beam, alternatives + 1, words)
        translator.check(options)  # the server's options picked: ScratchformerError -> 400 (the handler below)
        costs = text_costs(translator, texts, beam)
        if (cost := sum(costs)) > settings.max_cost:
            raise ServeError(413, f"this request may take {cost} decoding steps x beams (sentences x beam x their "
                                  f"output budgets), over this server's max_cost {settings.max_cost}: send fewer "
                                  "or shorter sentences, or a smaller beam")
        try:
            hyps = await asyncio.wait_for(batcher.submit(texts, options, costs), settings.timeout)
        except asyncio.TimeoutError:
            raise ServeError(408, f"the translation took longer than this server's timeout of "
                                  f"{settings.timeout:g} s: send fewer or shorter sentences") from None
        best = [h[0][0] for h in hyps]
        out: dict[str, Any] = {"translatedText": best[0] if single else best}
        if alternatives:
            alts = [[text for text, _ in h[1:]] for h in hyps]
            scores = [[score for _, score in h] for h in hyps]
            out |= {"alternatives": alts[0] if single else alts, "scores": scores[0] if single else scores}
        if auto:
            out["detectedLanguage"] = detected[0] if single else detected
        if warning := wrong_pair(texts, settings.source, settings.target):  # e.g. 我 爱 中国 to an en->zh model
            out["warning"] = warning  # a field LibreTranslate clients ignore; its text is translate's line
            LOG.warning("scratchformer serve: a /translate request: %s", warning)
        return JSONResponse(out)

    @app.post("/detect")
    async def detect_language(request: Request) -> JSONResponse:
        """LibreTranslate's language detection: [{"confidence": 0-100, "language": code}] for a text (a list of
        those for a list of texts), from data/language.py's detector."""
        fields = await request_fields_of(request)
        check_key(fields, request)
        texts, single = _texts(fields, settings)
        found = [[_detected(t, settings.source, auto=False)] for t in texts]
        return JSONResponse(found[0] if single else found)

    @app.get("/languages")
    async def languages() -> JSONResponse:
        return JSONResponse([{"code": settings.source, "name": LANGUAGE_NAMES.get(settings.source, settings.source),
                              "targets": [settings.target]},
                             {"code": settings.target, "name": LANGUAGE_NAMES.get(settings.target, settings.target),
                              "targets": []}])

    @app.get("/health")
    async def health() -> JSONResponse:
        """200 "ok" while a request can be served; 503 "busy" once the decoding call running now is older than
        the timeout (a new request would time out behind it). The run's name only, never its path. No key."""
        since = batcher.busy_since
        busy = 0.0 if since is None else max(0.0, time.monotonic() - since)
        stuck = busy > settings.timeout
        return JSONResponse({"status": "busy" if stuck else "ok", "run": translator.run.path.name,
                             "engine": translator.engine, "step": translator.step(),
                             "queued_sentences": metrics.queued_sentences, "busy_seconds": round(busy, 1)},
                            status_code=503 if stuck else 200)

    @app.get("/metrics")
    async def prometheus(request: Request) -> PlainTextResponse:
        """Prometheus text; with --api-key it needs the key too (?api_key=KEY or Authorization: Bearer KEY):
        its counts tell who uses the service how much."""
        check_key(await request_fields_of(request), request)
        return PlainTextResponse(metrics.render(), media_type="text/plain; version=0.0.4; charset=utf-8")

    @app.post("/attention")
    async def attention(request: Request) -> JSONResponse:
        """{"q": source, "translation": its translation} -> the cross-attention heatmap's numbers."""
        fields = await request_fields_of(request)
        check_key(fields, request)
        source, translation = fields.get("q"), fields.get("translation")
        if not isinstance(source, str) or not isinstance(translation, str):
            raise ServeError(400, 'give {"q": the source sentence, "translation": its translation}, both strings')
        _texts({"q": [source, translation]}, settings)  # the size limits
        try:
            found = await asyncio.wait_for(batcher.run_exclusive(translator.attention, source, translation),
                                           settings.timeout)
        except asyncio.TimeoutError:
            raise ServeError(408, f"the attention took longer than this server's timeout of "
                                  f"{settings.timeout:g} s") from None
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


def begin_shutdown(app: FastAPI) -> None:
    """SIGTERM's first step (callable from a signal handler): bodies still arriving are answered 503 at once."""
    if app.state.loop is not None:
        app.state.loop.call_soon_threadsafe(app.state.stopping.set)


def _install_error_handlers(app: FastAPI) -> None:
    """Every failure as {"error": one line}: ours, FastAPI's validation, Starlette's 404 / 405, our checks'."""
    app.add_exception_handler(ServeError, _refused)
    app.add_exception_handler(Cancelled, lambda r, e: _error(503, SHUTTING_DOWN))
    app.add_exception_handler(RequestValidationError, lambda r, e: _error(400, f"invalid request: {e.errors()}"))
    app.add_exception_handler(HTTPException, lambda r, e: _error(e.status_code, str(e.detail)))
    app.add_exception_handler(ValueError, lambda r, e: _error(400, str(e).splitlines()[0] if str(e) else repr(e)))
    app.add_exception_handler(MemoryError, lambda r, e: _error(413, "out of memory: send fewer or shorter "
                                                                    "sentences, or a smaller beam"))

"""A request's fields, read before anything else looks at it and bounded while it streams: a JSON object, or form
data (urlencoded or multipart) as LibreTranslate takes, under the query string's fields. Every refusal is a
ServeError (an HTTP status and one line).

    fields = await request_fields(request, body_limit=2_625_536)

- Only application/json, application/x-www-form-urlencoded and multipart/form-data bodies (or none) are read:
  any other type (text/plain, application/xml, none at all) is 415, so a page on another site cannot post JSON
  to a local server without the browser's CORS preflight, which this server never answers.
- A body is read chunk by chunk and refused (413) once it passes `body_limit`, with or without Content-Length
  (chunked transfer): nothing is read whole, nothing is written to disk. Forms are parsed from the bounded bytes,
  and a file part is refused, so no upload is ever spooled to a temporary file.
- Text must be valid UTF-8 everywhere: JSON, form fields (%ff%fe included), multipart parts, the query string.
- JSON nested too deep for the parser is 400, not a RecursionError (a 500).
- A body must be in within `timeout` seconds (body_timeout): else 408, and the connection is closed. A client
  that leaves before its body is in is a 499 (one log line, never a 500), and a server that is shutting down
  answers a body still arriving 503 at once (`stopping` set).
"""

from __future__ import annotations

import asyncio
import json
import urllib.parse
from typing import Any

from python_multipart.exceptions import FormParserError
from python_multipart.multipart import MultipartParser, parse_options_header
from starlette.requests import ClientDisconnect, Request

JSON, FORM, MULTIPART = "application/json", "application/x-www-form-urlencoded", "multipart/form-data"
MAX_FIELDS = 1000  # form fields (and query fields) per request
CLIENT_LEFT = 499  # nginx's "client closed request": counted apart from the server's own errors
SHUTTING_DOWN = "the server is shutting down: try again"


class ServeError(Exception):
    """A request we refuse: its HTTP status and the one line the client gets as {"error": ...}; `close`: close
    the connection after the answer (a body that may still be arriving)."""

    def __init__(self, status: int, message: str, close: bool = False) -> None:
        super().__init__(message)
        self.status, self.message, self.close = status, message, close


async def _next_chunk(chunks, stopping: asyncio.Event | None) -> bytes:
    """The body's next chunk, or 503 as soon as `stopping` is set."""
    if stopping is None:
        return await anext(chunks)
    if stopping.is_set():
        raise ServeError(503, SHUTTING_DOWN, close=True)
    get, stop = asyncio.ensure_future(anext(chunks)), asyncio.ensure_future(stopping.wait())
    try:
        await asyncio.wait((get, stop), return_when=asyncio.FIRST_COMPLETED)
    finally:
        stop.cancel()
        if not get.done():
            get.cancel()
    if not get.done() or get.cancelled():
        raise ServeError(503, SHUTTING_DOWN, close=True)
    return get.result()


async def read_body(request: Request, limit: int, timeout: float | None = None,
                    stopping: asyncio.Event | None = None) -> bytes:
    """The whole body, at most `limit` bytes: 413 from the Content-Length, else as soon as the stream passes it;
    408 once `timeout` seconds have passed, 499 when the client leaves, 503 once `stopping` is set."""
    length = request.headers.get("content-length", "")
    if length.isdigit() and int(length) > limit:
        raise ServeError(413, f"the request body is over {limit} bytes")
    body = bytearray()
    chunks = request.stream().__aiter__()
    loop = asyncio.get_running_loop()
    end = None if timeout is None else loop.time() + timeout
    while True:
        try:
            async with asyncio.timeout_at(end):
                chunk = await _next_chunk(chunks, stopping)
        except StopAsyncIteration:
            return bytes(body)
        except TimeoutError:
            raise ServeError(408, f"the request body did not arrive within {timeout:g} s (this server's body_timeout): "
                                  f"{len(body)} bytes came" + (f" of {length}" if length.isdigit() else ""),
                             close=True) from None
        except ClientDisconnect:
            raise ServeError(CLIENT_LEFT, f"the client left before its request body arrived ({len(body)} bytes came"
                                          + (f" of {length})" if length.isdigit() else ")")) from None
        body += chunk  # a chunked body has no content-length: stop reading at the limit
        if len(body) > limit:
            raise ServeError(413, f"the request body is over {limit} bytes")


def _text(raw: bytes, what: str) -> str:
    try:
        return raw.decode("utf-8")
    except UnicodeDecodeError as e:
        raise ServeError(400, f"{what} is not valid UTF-8 (byte 0x{raw[e.start]:02x} at {e.start}): send UTF-8 "
                              "text") from None


def parse_query(raw: bytes, what: str = "the form data") -> dict[str, Any]:
    """urlencoded fields (a repeated one, q=a&q=b, as a list); 400 for invalid UTF-8 (raw or %-escaped)."""
    try:
        pairs = urllib.parse.parse_qsl(_text(raw, what), keep_blank_values=True, strict_parsing=False,
                                       encoding="utf-8", errors="strict", max_num_fields=MAX_FIELDS)
    except UnicodeDecodeError:
        raise ServeError(400, f"{what} holds %-escapes that are not valid UTF-8 (such as %ff): send UTF-8 "
                              "text") from None
    except ValueError:  # max_num_fields
        raise ServeError(400, f"{what} has more than {MAX_FIELDS} fields") from None
    return _grouped(pairs)


def _grouped(pairs: list[tuple[str, str]]) -> dict[str, Any]:
    fields: dict[str, Any] = {}
    for name, value in pairs:
        if name in fields:
            fields[name] = [*fields[name], value] if isinstance(fields[name], list) else [fields[name], value]
        else:
            fields[name] = value
    return fields


def parse_multipart(body: bytes, content_type: str) -> dict[str, Any]:
    """multipart/form-data text fields; 400 for a file part, a missing name, invalid UTF-8 or malformed parts."""
    _, params = parse_options_header(content_type)
    boundary = params.get(b"boundary")
    if not boundary:
        raise ServeError(400, "malformed form data: a multipart/form-data body needs a boundary")
    pairs: list[tuple[str, str]] = []
    part: dict[str, Any] = {}
    header = [b"", b""]

    def on_part_begin() -> None:
        part.clear()
        part.update(headers={}, data=bytearray())

    def on_header_end() -> None:
        part["headers"][header[0].lower()] = header[1]
        header[0] = header[1] = b""

    def on_headers_finished() -> None:
        _, options = parse_options_header(part["headers"].get(b"content-disposition", b""))
        if b"name" not in options:
            raise ServeError(400, "malformed form data: a part has no name (Content-Disposition: form-data; "
                                  'name="q")')
        part["name"] = _text(options[b"name"], "a form field's name")
        if b"filename" in options:
            raise ServeError(400, f"{part['name']!r} must be text, not a file upload")
        if len(pairs) >= MAX_FIELDS:
            raise ServeError(400, f"the form data has more than {MAX_FIELDS} fields")

    def on_part_end() -> None:
        pairs.append((part["name"], _text(bytes(part["data"]), f"form field {part['name']!r}")))

    callbacks = {
        "on_part_begin": on_part_begin,
        "on_part_data": lambda data, start, end: part["data"].extend(data[start:end]),
        "on_part_end": on_part_end,
        "on_header_field": lambda data, start, end: header.__setitem__(0, header[0] + data[start:end]),
        "on_header_value": lambda data, start, end: header.__setitem__(1, header[1] + data[start:end]),
        "on_header_end": on_header_end,
        "on_headers_finished": on_headers_finished,
    }
    try:
        parser = MultipartParser(boundary, callbacks)
        parser.write(body)
        parser.finalize()
    except (FormParserError, ValueError, KeyError) as e:
        raise ServeError(400, f"malformed form data: {str(e).splitlines()[0] if str(e) else type(e).__name__}") \
            from None
    return _grouped(pairs)


def parse_json(body: bytes) -> dict[str, Any]:
    """A JSON object (no body: {}); 400 for invalid JSON or UTF-8, deep nesting, or anything but an object."""
    if not body.strip():
        return {}
    try:
        fields = json.loads(body)
    except RecursionError:  # json's C scanner recurses per level: [[[[... a thousand deep
        raise ServeError(400, "malformed JSON: nested too deep (a request is an object of strings, numbers and "
                              "lists of strings)") from None
    except (ValueError, UnicodeDecodeError) as e:
        raise ServeError(400, f"malformed JSON: {str(e).splitlines()[0]}") from None
    if not isinstance(fields, dict):
        raise ServeError(400, f"the JSON body must be an object such as {{\"q\": \"Hello\", \"source\": \"en\", "
                              f"\"target\": \"zh\"}}, got a {type(fields).__name__}")
    return fields


async def request_fields(request: Request, body_limit: int, timeout: float | None = None,
                         stopping: asyncio.Event | None = None) -> dict[str, Any]:
    """The request's fields: its body's (JSON or form) over its query string's; see the module docstring and
    read_body for `timeout` and `stopping`."""
    kind = request.headers.get("content-type", "")
    main = kind.split(";")[0].strip().lower()
    if main not in ("", JSON, FORM, MULTIPART):
        raise ServeError(415, f"content type {main!r}: send {JSON} (or a form: {FORM}, {MULTIPART})")
    body = await read_body(request, body_limit, timeout, stopping)
    if main == "" and body.strip():
        raise ServeError(415, f"a body without a content type: send it as {JSON} (or a form: {FORM}, "
                              f"{MULTIPART})")
    fields = parse_query(request.scope.get("query_string", b""), "the query string")
    if main == FORM:
        return {**fields, **parse_query(body)}
    if main == MULTIPART:
        return {**fields, **parse_multipart(body, kind)}
    return {**fields, **parse_json(body)}

"""`scratchformer serve RUN_DIR`: a LibreTranslate-compatible translation service with dynamic batching
(scratchformer/serve/)."""

from __future__ import annotations

import argparse


def cmd_serve(args: argparse.Namespace) -> int:
    from scratchformer.cli.common import set_threads
    from scratchformer.config.decoding import given_flags
    from scratchformer.serve import Settings, serve

    set_threads(args.threads)
    settings = Settings(args.source or "", args.target or "", beam=args.beam, batch_wait_ms=args.batch_wait_ms,
                        max_batch_tokens=args.max_batch_tokens, max_chars=args.max_chars,
                        max_sentences=args.max_sentences, max_beam=args.max_beam, timeout=args.timeout,
                        api_key=args.api_key, max_cost=args.max_cost, allowed_hosts=tuple(args.allowed_host),
                        header_timeout=args.header_timeout, body_timeout=args.body_timeout,
                        keep_alive_timeout=args.keep_alive_timeout, max_connections=args.max_connections)
    return serve(args.run_dir, settings, host=args.host, port=args.port, weights=args.weights,
                 log_level=args.log_level, decoding=given_flags(args))


def register(sub: argparse._SubParsersAction) -> None:
    from scratchformer.cli.common import add_decoding_args
    from scratchformer.i18n import _

    p = sub.add_parser("serve", help="serve a translation run over HTTP (LibreTranslate-compatible)")
    p.add_argument("run_dir")
    p.add_argument("--host", default="127.0.0.1", help="address to listen on (default 127.0.0.1: this machine only)")
    p.add_argument("--port", type=int, default=5000, help="TCP port (default 5000, LibreTranslate's; 0: a free one)")
    p.add_argument("--api-key", help="require this key as the requests' api_key field (as LibreTranslate does) or an "
                   "'Authorization: Bearer KEY' header, on every path but /, /languages and /health (/metrics too)")
    p.add_argument("--allowed-host", action="append", default=[], metavar="NAME",
                   help="a host name clients reach the server by, besides its address, localhost and IP addresses "
                        "(repeatable; '*': any). Other Host headers get 421, against DNS rebinding")
    p.add_argument("--weights", help="another safetensors file of the same run (e.g. averaged.safetensors)")
    p.add_argument("--threads", type=int, default=None, help="torch CPU threads (default: torch's choice)")
    p.add_argument("--source", help="source language code (default: from the run's corpus name, e.g. en-zh)")
    p.add_argument("--target", help="target language code (default: from the run's corpus name)")
    d = p.add_argument_group("decoding (config/decoding.py, as `translate`; default: the run's decoding.json; a "
                             "request may ask for another --beam)")
    add_decoding_args(d, "serve")
    d.add_argument("--max-beam", type=int, default=16, help="the widest beam a request may ask for (default 16)")
    b = p.add_argument_group("batching and limits")
    b.add_argument("--batch-wait-ms", type=float, default=10.0,
                   help="merge the requests that arrive within this many ms into one decoding batch (default 10; "
                        "0: no merging, one request per decoding call)")
    b.add_argument("--max-batch-tokens", type=int, default=4096,
                   help="most source tokens (unpadded, with </s>) of the requests merged into one decoding call "
                        "(default 4096; decoding.json's max_tokens still caps the padded tokens of each batch)")
    p.set_defaults(retired_flags={"--max-tokens": "--max-batch-tokens (decoding.json's max_tokens caps each batch)"})
    b.add_argument("--max-chars", type=int, default=5000, help="most characters per request (more: 413)")
    b.add_argument("--max-sentences", type=int, default=128, help="most sentences per request (more: 413)")
    b.add_argument("--timeout", type=float, default=60.0,
                   help="seconds a request may take (more: 408, and its decoding stops at the next step)")
    b.add_argument("--max-cost", type=int, default=200_000,
                   help="most decoding steps x beams a request may cost: beam x the sum of its sentences' output "
                        "budgets (source tokens + 50); more: 413 before any decoding (default 200000; the worst "
                        "request within the other defaults would cost 1.4 million)")
    c = p.add_argument_group(_("connections (slow or idle clients)"))
    c.add_argument("--header-timeout", type=float, default=10.0,
                   help=_("seconds a connection may take to send a request's headers; slower or idle ones are "
                          "closed (default 10)"))
    c.add_argument("--body-timeout", type=float, default=30.0,
                   help=_("seconds a request's body may take to arrive once its headers are in (more: 408; "
                          "default 30)"))
    c.add_argument("--keep-alive-timeout", type=float, default=5.0,
                   help=_("seconds an idle connection stays open after an answer (default 5)"))
    c.add_argument("--max-connections", type=int, default=512,
                   help=_("connections served at once; more get 503 (default 512, fewer if the open-files limit, "
                          "ulimit -n, leaves less room)"))
    b.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level (default warning)")
    p.set_defaults(func=cmd_serve)

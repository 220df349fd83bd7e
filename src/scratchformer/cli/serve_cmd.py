"""`scratchformer serve RUN_DIR`: a LibreTranslate-compatible translation service with dynamic batching
(scratchformer/serve/). The everyday flags stay flags; the server's limits are keys of `--set KEY=VALUE`, beside the
decoding options' (LIMITS below; serve/app.py's Settings holds them)."""

from __future__ import annotations

import argparse
import os

from scratchformer.i18n import N_

# serve's --set keys beyond the decoding options: name -> (type, default, help); Settings' fields of the same names
LIMITS = {
    "max_beam": (int, 16, N_("the widest beam a request may ask for")),
    "batch_wait_ms": (float, 10.0, N_("merge the requests that arrive within this many ms into one decoding batch "
                                      "(0: no merging, one request per decoding call)")),
    "max_batch_tokens": (int, 4096, N_("most source tokens (unpadded, with </s>) of the requests merged into one "
                                       "decoding call (decoding.json's max_tokens still caps each batch)")),
    "max_chars": (int, 5000, N_("most characters per request (more: 413)")),
    "max_sentences": (int, 128, N_("most sentences per request (more: 413)")),
    "timeout": (float, 60.0, N_("seconds a request may take (more: 408, and its decoding stops at the next step)")),
    "max_cost": (int, 200_000, N_("most decoding steps x beams a request may cost: beam x the sum of its sentences' "
                                  "output budgets (source tokens + 50); more: 413 before any decoding")),
    "header_timeout": (float, 10.0, N_("seconds a connection may take to send a request's headers; slower or idle "
                                       "ones are closed")),
    "body_timeout": (float, 30.0, N_("seconds a request's body may take to arrive once its headers are in (more: "
                                     "408)")),
    "keep_alive_timeout": (float, 5.0, N_("seconds an idle connection stays open after an answer")),
    "max_connections": (int, 512, N_("connections served at once; more get 503 (fewer if the open-files limit, "
                                     "ulimit -n, leaves less room)")),
}


def default_threads() -> int | None:
    """serve's torch threads without --threads: every core but one, which stays with the HTTP server, the batcher and
    the tokenizers. Measured on a 2-core Xeon, beam 4, 16 clients (benchmarks/bench_serve.py, 2026-12-06): p99
    1.02 s and 34 sentences/s with 2 torch threads, 0.53 s and 47 sentences/s with 1. None (torch's choice) where
    OMP_NUM_THREADS already says, or on one core."""
    import torch

    if "OMP_NUM_THREADS" in os.environ or torch.get_num_threads() < 2:
        return None
    return torch.get_num_threads() - 1


def cmd_serve(args: argparse.Namespace) -> int:
    from scratchformer.cli.common import set_threads
    from scratchformer.config.decoding_flags import given_flags, set_values
    from scratchformer.serve import Settings, serve

    set_threads(args.threads if args.threads is not None else default_threads())
    limits = {k: v for k, v in set_values(args).items() if k in LIMITS}
    settings = Settings(args.source or "", args.target or "", api_key=args.api_key, host=args.host,
                        allowed_hosts=tuple(args.allowed_host), **limits)
    return serve(args.run_dir, settings, port=args.port, weights=args.weights, log_level=args.log_level,
                 decoding=given_flags(args))


def register(sub: argparse._SubParsersAction) -> None:
    from scratchformer.config.decoding_flags import add_decoding_args

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
    p.add_argument("--threads", type=int, default=None, help=N_(
        "torch CPU threads (default: every core but one, which serves HTTP; OMP_NUM_THREADS if set)"))
    p.add_argument("--source", help="source language code (default: from the run's corpus name, e.g. en-zh)")
    p.add_argument("--target", help="target language code (default: from the run's corpus name)")
    p.add_argument("--log-level", default="warning", choices=["critical", "error", "warning", "info", "debug"],
                   help="uvicorn's log level (default warning)")
    p.set_defaults(retired_flags={"--max-tokens": N_("--set max_batch_tokens={value} (decoding.json's max_tokens caps "
                                                     "each batch)")})
    d = p.add_argument_group("decoding (config/decoding.py, as `translate`; default: the run's decoding.json; a "
                             "request may ask for another --beam)")
    add_decoding_args(d, "serve", extra=LIMITS)
    p.set_defaults(func=cmd_serve)

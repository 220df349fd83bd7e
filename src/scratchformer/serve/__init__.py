"""A translation service for a run: `scratchformer serve RUN_DIR`, LibreTranslate-compatible, with dynamic batching.

    batcher.py   requests merged into decoding batches, decoded off the event loop
    decoder.py   the run and its engine, through the CLI's own functions (same text as `translate`)
    app.py       the FastAPI app: /translate /languages /detect /health /metrics /attention and the page at /
    bodies.py    a request's fields: JSON or form bodies, bounded while they stream, strict UTF-8, 415 otherwise
    metrics.py   counters and latency quantiles, as Prometheus text
    protocol.py  the connections: header, body and idle timeouts, a cap (503 beyond), a file-descriptor budget
    server.py    start-up (load once, bind), uvicorn, graceful SIGTERM
    page.html    the page at /: type English, get Chinese, n-best and the cross-attention heatmap (no CDN)
"""

from scratchformer.serve.app import Settings, create_app
from scratchformer.serve.batcher import Batcher
from scratchformer.serve.decoder import Options, RunTranslator
from scratchformer.serve.server import serve

__all__ = ["Batcher", "Options", "RunTranslator", "Settings", "create_app", "serve"]

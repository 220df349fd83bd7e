"""The serve room's counters: requests by path and status, sentences, decoding batches and their sizes, latency
quantiles over a sliding window, the queue; rendered as Prometheus text (`GET /metrics`). Memory is bounded: a
fixed set of counters and a window of the latest latencies."""

from __future__ import annotations

import math
import time
from collections import Counter, deque

BATCH_BUCKETS = (1, 2, 4, 8, 16, 32, 64, 128, 256)  # sentences (or requests) per decoding call
QUANTILES = (0.5, 0.95, 0.99)
REASONS = ("header_timeout", "body_timeout", "over_cap", "fd_budget")  # why protocol.py closed a connection
WINDOW = 2048  # latest /translate latencies the quantiles are taken over


def quantile(sorted_xs: list[float], q: float) -> float:
    """The q-quantile (nearest rank) of an ascending list; 0 for none."""
    if not sorted_xs:
        return 0.0
    return sorted_xs[min(len(sorted_xs) - 1, max(0, math.ceil(q * len(sorted_xs)) - 1))]


class Histogram:
    """A Prometheus histogram: cumulative bucket counts, sum and count."""

    def __init__(self, buckets: tuple[float, ...]) -> None:
        self.buckets, self.counts, self.sum, self.count = buckets, [0] * len(buckets), 0.0, 0

    def observe(self, x: float) -> None:
        for i, b in enumerate(self.buckets):
            if x <= b:
                self.counts[i] += 1
        self.sum += x
        self.count += 1

    def lines(self, name: str) -> list[str]:
        out = [f'{name}_bucket{{le="{b:g}"}} {c}' for b, c in zip(self.buckets, self.counts)]
        return [*out, f'{name}_bucket{{le="+Inf"}} {self.count}', f"{name}_sum {self.sum:g}",
                f"{name}_count {self.count}"]


class Metrics:
    """Everything /metrics reports; updated on the event loop only (no locks needed)."""

    def __init__(self) -> None:
        self.started = time.time()
        self.requests: Counter[tuple[str, int]] = Counter()  # (path, status) -> count
        self.in_flight = 0
        self.sentences = 0
        self.batch_sentences = Histogram(BATCH_BUCKETS)
        self.batch_requests = Histogram(BATCH_BUCKETS)
        self.decode_seconds = 0.0
        self.latencies: deque[float] = deque(maxlen=WINDOW)
        self.queued_sentences = 0  # waiting for a decoding batch, now
        self.cancelled_batches = 0  # decoding calls stopped because every request of theirs gave up, or shutdown
        self.connections = 0  # open now (protocol.py)
        self.closed: Counter[str] = Counter()  # connections the server closed, by reason (protocol.py's limits)

    def request_done(self, path: str, status: int, seconds: float) -> None:
        self.requests[(path, status)] += 1
        if path == "/translate":
            self.latencies.append(seconds)

    def batch_done(self, sentences: int, requests: int, seconds: float) -> None:
        self.sentences += sentences
        self.batch_sentences.observe(sentences)
        self.batch_requests.observe(requests)
        self.decode_seconds += seconds

    def render(self) -> str:
        """The Prometheus text exposition format (version 0.0.4)."""
        p = "scratchformer_serve"
        out = [f"# HELP {p}_requests_total HTTP requests answered, by path and status code.",
               f"# TYPE {p}_requests_total counter"]
        out += [f'{p}_requests_total{{path="{path}",code="{code}"}} {n}' for (path, code), n in
                sorted(self.requests.items())]
        out += [f"# HELP {p}_requests_in_flight HTTP requests being answered now.", f"# TYPE {p}_requests_in_flight "
                "gauge", f"{p}_requests_in_flight {self.in_flight}",
                f"# HELP {p}_queued_sentences Sentences waiting for a decoding batch.",
                f"# TYPE {p}_queued_sentences gauge", f"{p}_queued_sentences {self.queued_sentences}",
                f"# HELP {p}_sentences_total Sentences translated.", f"# TYPE {p}_sentences_total counter",
                f"{p}_sentences_total {self.sentences}",
                f"# HELP {p}_decode_seconds_total Seconds spent decoding.", f"# TYPE {p}_decode_seconds_total counter",
                f"{p}_decode_seconds_total {self.decode_seconds:g}",
                f"# HELP {p}_cancelled_batches_total Decoding calls stopped because their requests gave up.",
                f"# TYPE {p}_cancelled_batches_total counter", f"{p}_cancelled_batches_total {self.cancelled_batches}",
                f"# HELP {p}_connections Open HTTP connections.", f"# TYPE {p}_connections gauge",
                f"{p}_connections {self.connections}",
                f"# HELP {p}_connections_refused_total Connections closed or refused by a limit (header_timeout, "
                "body_timeout, over_cap: 503, fd_budget).", f"# TYPE {p}_connections_refused_total counter",
                *(f'{p}_connections_refused_total{{reason="{r}"}} {self.closed[r]}' for r in REASONS),
                f"# HELP {p}_batch_sentences Sentences per decoding batch.", f"# TYPE {p}_batch_sentences histogram",
                *self.batch_sentences.lines(f"{p}_batch_sentences"),
                f"# HELP {p}_batch_requests Requests merged into one decoding batch.",
                f"# TYPE {p}_batch_requests histogram", *self.batch_requests.lines(f"{p}_batch_requests")]
        xs = sorted(self.latencies)
        out += [f"# HELP {p}_latency_seconds /translate latency over the latest {WINDOW} requests.",
                f"# TYPE {p}_latency_seconds summary"]
        out += [f'{p}_latency_seconds{{quantile="{q:g}"}} {quantile(xs, q):.6f}' for q in QUANTILES]
        out += [f"{p}_latency_seconds_sum {sum(xs):.6f}", f"{p}_latency_seconds_count {len(xs)}",
                f"# HELP {p}_uptime_seconds Seconds since start-up.", f"# TYPE {p}_uptime_seconds gauge",
                f"{p}_uptime_seconds {time.time() - self.started:.3f}"]
        return "\n".join(out) + "\n"

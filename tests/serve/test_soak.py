"""Soak (make test-slow): ten minutes of steady load on `scratchformer serve` under a memory ceiling. Every request
succeeds, and the server's resident memory does not grow after warm-up (the metrics keep a bounded window, the
batcher drops what it answered). SCRATCHFORMER_SOAK_SECONDS shortens it for a try (default 600)."""

from __future__ import annotations

import os
import statistics
import threading
import time
from pathlib import Path

import pytest

from .conftest import TEXTS, request, start_server

SECONDS = float(os.environ.get("SCRATCHFORMER_SOAK_SECONDS", "600"))
CEILING = 1536 * 2**20  # bytes of RSS the server may never pass (a tiny model: it holds ~300 MiB)
GROWTH = 16 * 2**20  # what the RSS may drift after warm-up (allocator noise), at most
CLIENTS = 8


def rss(pid: int) -> int:
    for line in Path(f"/proc/{pid}/status").read_text().splitlines():
        if line.startswith("VmRSS:"):
            return int(line.split()[1]) * 1024
    raise AssertionError("no VmRSS line")


@pytest.mark.slow
@pytest.mark.skipif(not Path("/proc/self/status").exists(), reason="reads the RSS from /proc (Linux)")
def test_steady_load_keeps_memory_flat(tiny_run):
    server = start_server(tiny_run, "--source", "en", "--target", "zh", "--set", "batch_wait_ms=5")
    deadline = time.monotonic() + SECONDS
    counts, failures, samples = [0] * CLIENTS, [], []

    def client(c: int) -> None:
        i = c
        while time.monotonic() < deadline:
            q = [TEXTS[(i + k) % len(TEXTS)] for k in range(1 + i % 3)]  # lists of 1-3, some with n-best
            fields = {"alternatives": 1} if i % 5 == 0 else {}
            status, out, _ = request(server.url, "/translate", {"q": q, "source": "en", "target": "zh", **fields})
            if status != 200 or len(out["translatedText"]) != len(q):
                failures.append((status, out))
            counts[c] += 1
            i += CLIENTS

    threads = [threading.Thread(target=client, args=(c,), daemon=True) for c in range(CLIENTS)]
    try:
        for t in threads:
            t.start()
        while time.monotonic() < deadline:
            samples.append(rss(server.proc.pid))
            assert samples[-1] < CEILING, f"RSS {samples[-1] / 2**20:.0f} MiB passed the ceiling"
            time.sleep(max(0.5, SECONDS / 200))
        for t in threads:
            t.join(120)
    finally:
        assert server.stop() == 0
    assert not failures, failures[:3]
    assert sum(counts) >= CLIENTS * 5, counts
    fifth = max(1, len(samples) // 5)
    warm, last = statistics.median(samples[fifth: 2 * fifth]), statistics.median(samples[-fifth:])
    print(f"soak: {sum(counts)} requests in {SECONDS:g} s, RSS after warm-up {warm / 2**20:.1f} MiB, at the end "
          f"{last / 2**20:.1f} MiB, peak {max(samples) / 2**20:.1f} MiB")
    assert last - warm <= GROWTH, (f"RSS grew {(last - warm) / 2**20:.1f} MiB after warm-up over {sum(counts)} "
                                   f"requests: {[s // 2**20 for s in samples[::fifth]]} MiB")

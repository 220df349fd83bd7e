"""serve/batcher.py without HTTP: requests arriving within the wait are merged into one decoding call (in arrival
order, each getting back its own slice), wait 0 decodes each alone, the token cap and the options split batches, an
error reaches every request of its batch, a request that gave up is not decoded, and decoding runs off the event
loop. Arrivals are scheduled in one event-loop tick, so no test depends on the clock."""

from __future__ import annotations

import asyncio
import threading

import pytest

from scratchformer.serve.batcher import Batcher
from scratchformer.serve.metrics import Metrics, quantile


class Recorder:
    """A decode function that records its calls and answers text -> (text reversed, key)."""

    def __init__(self, fail_on: str | None = None) -> None:
        self.calls: list[tuple[list[str], object]] = []
        self.fail_on = fail_on

    def __call__(self, texts: list[str], key: object) -> list:
        self.calls.append((list(texts), key))
        if self.fail_on in texts:
            raise ValueError(f"cannot decode {self.fail_on!r}")
        return [(t[::-1], key) for t in texts]


def run(coro_fn, decode, wait_ms: float = 50, max_tokens: int = 1000):
    async def main():
        metrics = Metrics()
        batcher = Batcher(decode, lambda texts: sum(len(t) + 1 for t in texts), wait_ms, max_tokens, metrics)
        await batcher.start()
        try:
            return await coro_fn(batcher), metrics
        finally:
            await batcher.stop()

    return asyncio.run(main())


REQUESTS = [["abc", "de"], ["fghij"], ["k", "lm", "nop"]]


def test_requests_within_the_wait_share_one_call_and_get_their_own_results():
    decode = Recorder()
    out, metrics = run(lambda b: asyncio.gather(*(b.submit(r, "beam4") for r in REQUESTS)), decode)
    assert decode.calls == [(["abc", "de", "fghij", "k", "lm", "nop"], "beam4")]
    assert out == [[(t[::-1], "beam4") for t in r] for r in REQUESTS]
    assert metrics.batch_requests.count == 1 and metrics.batch_requests.sum == 3 and metrics.sentences == 6
    assert metrics.queued_sentences == 0


def test_wait_zero_decodes_each_request_alone():
    decode = Recorder()
    out, metrics = run(lambda b: asyncio.gather(*(b.submit(r, 1) for r in REQUESTS)), decode, wait_ms=0)
    assert [c[0] for c in decode.calls] == REQUESTS  # first come, first served
    assert out == [[(t[::-1], 1) for t in r] for r in REQUESTS] and metrics.batch_requests.sum == 3


def test_token_cap_and_options_split_batches():
    decode = Recorder()
    # tokens: 7, 6, 9; a cap of 14 takes the first two, then the third alone
    run(lambda b: asyncio.gather(*(b.submit(r, 1) for r in REQUESTS)), decode, max_tokens=14)
    assert [c[0] for c in decode.calls] == [["abc", "de", "fghij"], ["k", "lm", "nop"]]
    decode = Recorder()
    out, _ = run(lambda b: asyncio.gather(b.submit(["a"], "x"), b.submit(["b"], "y"), b.submit(["c"], "x")), decode)
    assert decode.calls == [(["a", "c"], "x"), (["b"], "y")]
    assert out == [[("a", "x")], [("b", "y")], [("c", "x")]]


def test_an_error_reaches_every_request_of_its_batch_and_the_worker_lives_on():
    decode = Recorder(fail_on="fghij")

    async def scenario(b):
        first = await asyncio.gather(*(b.submit(r, 1) for r in REQUESTS), return_exceptions=True)
        return first, await b.submit(["after"], 1)

    (first, after), _ = run(scenario, decode)
    assert all(isinstance(e, ValueError) and "fghij" in str(e) for e in first)
    assert after == [("retfa", 1)]


def test_a_request_that_gave_up_is_not_decoded():
    decode = Recorder()

    async def scenario(b):
        task = asyncio.ensure_future(b.submit(["gone"], 1))
        await asyncio.sleep(0)  # queued, inside the 50 ms window
        task.cancel()
        kept = await b.submit(["kept"], 1)
        return task.cancelled(), kept

    (cancelled, kept), metrics = run(scenario, decode)
    assert cancelled and kept == [("tpek", 1)] and decode.calls == [(["kept"], 1)]
    assert metrics.queued_sentences == 0


def test_decoding_runs_off_the_event_loop():
    release, started = threading.Event(), threading.Event()

    def blocking(texts, key):
        started.set()
        assert release.wait(30), "the event loop never got to release the decoder"
        return texts

    async def scenario(b):
        job = asyncio.ensure_future(b.submit(["x"], 1))
        while not started.is_set():  # the loop keeps turning while the decoder thread blocks
            await asyncio.sleep(0.001)
        ticks = 0
        for _ in range(5):
            await asyncio.sleep(0)
            ticks += 1
        alive = not job.done()
        release.set()
        return ticks, alive, await job

    (ticks, alive, out), _ = run(scenario, blocking, wait_ms=0)
    assert ticks == 5 and alive and out == ["x"]


@pytest.mark.parametrize("q,expected", [(0.5, 3), (0.95, 5), (0.99, 5), (0.0, 1)])
def test_nearest_rank_quantiles(q, expected):
    assert quantile([1, 2, 3, 4, 5], q) == expected

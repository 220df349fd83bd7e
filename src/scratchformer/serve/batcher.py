"""Dynamic batching: requests that arrive within `wait_ms` of each other are merged into one decoding call (up to
`max_tokens` source tokens), which runs on one worker thread so the event loop (and /health) keeps answering.

    batcher = Batcher(decode, count_tokens, wait_ms=10, max_tokens=4096, metrics=Metrics())
    await batcher.start(); outputs = await batcher.submit(["Hello.", "Bye."], key); await batcher.stop()

`decode(texts, key)` gets every merged request's texts in arrival order and returns one output per text; the
decoder sorts them by length itself (translate_texts), and each request gets back its own slice, in its own order.
Only requests with the same key (decoding options) are merged. A batch opens when its oldest request arrived or
the previous batch ended, whichever is later (so the clients that batch answered can join this one), and leaves
`wait_ms` after the latest arrival, at most 5 x wait_ms after it opened, or as soon as it is full. wait_ms=0 turns
merging off: one request per decoding call.

A request that gives up (its --timeout passed, its client left) stops its own work: each decoding call runs under
a cancellation token (decoding/cancel.py) that is cancelled once every request of the batch gave up, and at
shutdown; the decoders check it between steps. A batch also holds at most `max_cost` decoding row-steps (besides
its first request), so a request waits behind at most one such batch, and /health can say how long the current
call has been running (`busy_seconds`).
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from scratchformer.decoding.cancel import Cancelled, Token
from scratchformer.serve.metrics import Metrics

MAX_WAITS = 5  # a batch that keeps getting requests leaves at most 5 x wait_ms after it opened


@dataclass
class _Job:
    texts: list[str]
    key: Hashable
    tokens: int
    future: asyncio.Future
    cost: int = 0  # decoding row-steps at most (app.request_cost); 0: not counted
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """An asyncio queue of requests and one worker that merges them into decoding calls."""

    def __init__(self, decode: Callable[[list[str], Any], Sequence], count_tokens: Callable[[list[str]], int],
                 wait_ms: float, max_tokens: int, metrics: Metrics, max_cost: int | None = None) -> None:
        self.decode, self.count_tokens, self.metrics = decode, count_tokens, metrics
        self.wait, self.max_tokens, self.max_cost = wait_ms / 1000, max_tokens, max_cost
        self.busy_since: float | None = None  # time.monotonic() the running call began; None: the worker is idle
        self._token: Token | None = None  # the running decoding call's
        self.queue: deque[_Job] = deque()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scratchformer-decode")
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._worker = asyncio.create_task(self._loop(), name="scratchformer-batcher")

    async def stop(self) -> None:
        """Cancel the worker (after the server answered its requests), stop the decoding call still running (at
        its next step) and end the decoding thread: shutdown never waits for work nobody will read."""
        if self._token is not None:
            self._token.cancel("the server is shutting down")
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        for job in self.queue:
            if not job.future.done():
                job.future.cancel()
        self.executor.shutdown(wait=True, cancel_futures=True)

    def _timed(self, token: Token | None, fn: Callable[..., Any], *args: Any) -> Any:
        """On the decoding thread: `fn(*args)` under `token`, with busy_since set while it runs."""
        self.busy_since = time.monotonic()
        try:
            if token is None:
                return fn(*args)
            with token.scope():
                return fn(*args)
        finally:
            self.busy_since = None

    async def run_exclusive(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the decoding thread: never at the same time as a decoding call (it may use the model)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, self._timed, None, fn, *args)

    async def submit(self, texts: list[str], key: Hashable, cost: int = 0) -> list:
        """The outputs of `texts` (in their order), decoded with whatever else arrives meanwhile under `key`;
        `cost`: its decoding row-steps at most, which max_cost counts."""
        future = asyncio.get_running_loop().create_future()
        job = _Job(list(texts), key, self.count_tokens(list(texts)), future, cost)
        self.queue.append(job)
        self.metrics.queued_sentences += len(job.texts)
        assert self._wake is not None, "Batcher.start() first"
        self._wake.set()
        try:
            return await future
        finally:
            if job in self.queue:  # cancelled (timeout, client gone) before its batch: never decoded
                self.queue.remove(job)
                self.metrics.queued_sentences -= len(job.texts)

    def _tokens(self) -> int:
        return sum(j.tokens for j in self.queue)

    def _take(self) -> list[_Job]:
        """The first job and every later one with its key, while the source tokens fit in max_tokens (and the
        costs in max_cost)."""
        first = self.queue[0]
        jobs, tokens, cost = [], 0, 0
        for job in list(self.queue):
            if job.key != first.key:
                continue
            if jobs and (tokens + job.tokens > self.max_tokens  # first come, first served: the rest waits
                         or (self.max_cost is not None and cost + job.cost > self.max_cost)):
                break
            jobs.append(job)
            tokens, cost = tokens + job.tokens, cost + job.cost
            if self.wait <= 0:  # merging off: one request per decoding call
                break
        for job in jobs:
            self.queue.remove(job)
            self.metrics.queued_sentences -= len(job.texts)
        return jobs

    async def _gather(self, finished: float) -> None:
        """Wait while requests keep coming: until `wait` after the oldest arrival or the last batch's end, each
        arrival extending it to `wait` after itself, at most MAX_WAITS waits in all; or until the batch is full."""
        assert self._wake is not None
        opened = max(self.queue[0].arrived, finished)
        deadline = opened + self.wait
        while self.queue and time.monotonic() < deadline and self._tokens() < self.max_tokens:
            self._wake.clear()
            try:
                await asyncio.wait_for(self._wake.wait(), deadline - time.monotonic())
            except asyncio.TimeoutError:
                return
            if self.queue:
                deadline = min(opened + MAX_WAITS * self.wait, max(deadline, self.queue[-1].arrived + self.wait))

    async def _loop(self) -> None:
        assert self._wake is not None
        loop = asyncio.get_running_loop()
        finished = 0.0  # when the last decoding call ended: the clients it answered may come back within `wait`
        while True:
            while not self.queue:
                self._wake.clear()
                await self._wake.wait()
            if self.wait > 0:
                await self._gather(finished)
            if not self.queue:  # every waiting request gave up
                continue
            jobs = [j for j in self._take() if not j.future.done()]
            if not jobs:
                continue
            texts = [t for j in jobs for t in j.texts]
            start = time.monotonic()
            self._token = token = Token()

            def gave_up(_: asyncio.Future, jobs: list[_Job] = jobs, token: Token = token) -> None:
                if all(j.future.done() for j in jobs):  # answered, timed out or left: nobody reads the rest
                    token.cancel("every request of its batch gave up")

            for job in jobs:
                job.future.add_done_callback(gave_up)
            try:
                outputs = await loop.run_in_executor(self.executor, self._timed, token, self.decode, texts,
                                                     jobs[0].key)
            except Cancelled:
                finished = time.monotonic()
                self.metrics.cancelled_batches += 1
                for job in jobs:  # shutdown: the requests still waiting get the error; else none is left
                    if not job.future.done():
                        job.future.set_exception(Cancelled("the server is shutting down"))
                continue
            except Exception as e:  # noqa: BLE001 (each request gets the error; the worker lives on)
                finished = time.monotonic()
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            finally:
                self._token = None
            finished = time.monotonic()
            self.metrics.batch_done(len(texts), len(jobs), finished - start)
            at = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(list(outputs[at: at + len(job.texts)]))
                at += len(job.texts)

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
"""

from __future__ import annotations

import asyncio
import time
from collections import deque
from collections.abc import Callable, Hashable, Sequence
from concurrent.futures import ThreadPoolExecutor
from dataclasses import dataclass, field
from typing import Any

from scratchformer.serve.metrics import Metrics

MAX_WAITS = 5  # a batch that keeps getting requests leaves at most 5 x wait_ms after it opened


@dataclass
class _Job:
    texts: list[str]
    key: Hashable
    tokens: int
    future: asyncio.Future
    arrived: float = field(default_factory=time.monotonic)


class Batcher:
    """An asyncio queue of requests and one worker that merges them into decoding calls."""

    def __init__(self, decode: Callable[[list[str], Any], Sequence], count_tokens: Callable[[list[str]], int],
                 wait_ms: float, max_tokens: int, metrics: Metrics) -> None:
        self.decode, self.count_tokens, self.metrics = decode, count_tokens, metrics
        self.wait, self.max_tokens = wait_ms / 1000, max_tokens
        self.queue: deque[_Job] = deque()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scratchformer-decode")
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None

    async def start(self) -> None:
        self._wake = asyncio.Event()
        self._worker = asyncio.create_task(self._loop(), name="scratchformer-batcher")

    async def stop(self) -> None:
        """Cancel the worker (after the server answered its requests) and end the decoding thread."""
        if self._worker is not None:
            self._worker.cancel()
            try:
                await self._worker
            except asyncio.CancelledError:
                pass
        for job in self.queue:
            if not job.future.done():
                job.future.cancel()
        self.executor.shutdown(wait=True)

    async def run_exclusive(self, fn: Callable[..., Any], *args: Any) -> Any:
        """`fn(*args)` on the decoding thread: never at the same time as a decoding call (it may use the model)."""
        return await asyncio.get_running_loop().run_in_executor(self.executor, fn, *args)

    async def submit(self, texts: list[str], key: Hashable) -> list:
        """The outputs of `texts` (in their order), decoded with whatever else arrives meanwhile under `key`."""
        future = asyncio.get_running_loop().create_future()
        job = _Job(list(texts), key, self.count_tokens(list(texts)), future)
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
        """The first job and every later one with its key, while the source tokens fit in max_tokens."""
        first = self.queue[0]
        jobs, tokens = [], 0
        for job in list(self.queue):
            if job.key != first.key:
                continue
            if jobs and tokens + job.tokens > self.max_tokens:  # first come, first served: the rest waits
                break
            jobs.append(job)
            tokens += job.tokens
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
            try:
                outputs = await loop.run_in_executor(self.executor, self.decode, texts, jobs[0].key)
            except Exception as e:  # noqa: BLE001 (each request gets the error; the worker lives on)
                finished = time.monotonic()
                for job in jobs:
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            finished = time.monotonic()
            self.metrics.batch_done(len(texts), len(jobs), finished - start)
            at = 0
            for job in jobs:
                if not job.future.done():
                    job.future.set_result(list(outputs[at: at + len(job.texts)]))
                at += len(job.texts)

"""Dynamic batching: requests that arrive within `wait_ms` of each other are merged into one decoding call (up to
`max_tokens` source tokens), which runs on one worker thread so the event loop (and /health) keeps answering.

    batcher = Batcher(decode, count_tokens, wait_ms=10, max_tokens=4096, metrics=Metrics())
    await batcher.start(); outputs = await batcher.submit(["Hello.", "Bye."], key); await batcher.stop()

`decode(texts, key)` gets every merged request's texts in arrival order and returns one output per text; the
decoder sorts them by length itself (the Translator's pipeline), and each request gets back its own slice, in its
own order.
Only requests with the same key (decoding options) are merged. A batch opens when its oldest request arrived or
the previous batch ended, whichever is later (so the clients that batch answered can join this one), and leaves
`wait_ms` after the latest arrival, at most 5 x wait_ms after it opened, or as soon as it is full. wait_ms=0 turns
merging off: one request per decoding call.

A request that gives up (its timeout passed, its client left) stops its own work: each decoding call runs under
a cancellation token (decoding/cancel.py) that is cancelled once every request of the call gave up, and at
shutdown; the decoders check it between steps. A long request is decoded in slices of at most `slice_cost`
decoding row-steps (and max_tokens source tokens), and after each slice the requests that arrived meanwhile go
first: a short request waits behind at most about one slice, never behind a whole long request. /health reads
`busy_since`, when the running call began.
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
    tokens: list[int]  # source tokens of each text
    future: asyncio.Future
    costs: list[int]  # decoding row-steps of each text at most (app.text_costs); zeros: not counted
    arrived: float = field(default_factory=time.monotonic)
    taken: int = 0  # texts handed to a decoding call so far: the next slice starts here
    outputs: list = field(default_factory=list)  # of the texts decoded so far


class Batcher:
    """An asyncio queue of requests and one worker that merges them into decoding calls."""

    def __init__(self, decode: Callable[[list[str], Any], Sequence], count_tokens: Callable[[list[str]], int],
                 wait_ms: float, max_tokens: int, metrics: Metrics, slice_cost: int | None = None) -> None:
        self.decode, self.count_tokens, self.metrics = decode, count_tokens, metrics
        self.wait, self.max_tokens, self.slice_cost = wait_ms / 1000, max_tokens, slice_cost
        self.busy_since: float | None = None  # time.monotonic() the running call began; None: the worker is idle
        self._token: Token | None = None  # the running decoding call's
        self.queue: deque[_Job] = deque()
        self.executor = ThreadPoolExecutor(max_workers=1, thread_name_prefix="scratchformer-decode")
        self._wake: asyncio.Event | None = None
        self._worker: asyncio.Task | None = None
        self._event_loop: asyncio.AbstractEventLoop | None = None
        self.closed = ""  # why no request is taken any more (abort); "" while open

    async def start(self) -> None:
        self._event_loop = asyncio.get_running_loop()
        self._wake = asyncio.Event()
        self._worker = asyncio.create_task(self._loop(), name="scratchformer-batcher")

    def abort(self, reason: str = "the server is shutting down") -> None:
        """Fail every request now with Cancelled(reason) (the app answers 503), stop the running call at its next
        step, and take no more: what a shutdown does once its grace period is over. On the event loop."""
        self.closed = reason
        if self._token is not None:
            self._token.cancel(reason)
        for job in list(self.queue):
            self.queue.remove(job)
            self.metrics.queued_sentences -= len(job.texts) - job.taken
            if not job.future.done():
                job.future.set_exception(Cancelled(reason))

    def abort_later(self, seconds: float, reason: str = "the server is shutting down") -> None:
        """abort(reason) `seconds` from now; callable from any thread or a signal handler."""
        if self._event_loop is not None:
            self._event_loop.call_soon_threadsafe(self._event_loop.call_later, seconds, self.abort, reason)

    async def stop(self) -> None:
        """Cancel the worker (after the server answered its requests), stop the decoding call still running (at
        its next step) and end the decoding thread: shutdown never waits for work nobody will read."""
        self.abort()
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

    async def submit(self, texts: list[str], key: Hashable, costs: Sequence[int] | int = 0) -> list:
        """The outputs of `texts` (in their order), decoded with whatever else arrives meanwhile under `key`;
        `costs`: each text's decoding row-steps at most (an int: the request's, spread over its texts), which
        slice_cost counts."""
        texts = list(texts)
        if self.closed:
            raise Cancelled(self.closed)
        if not texts:
            return []
        if isinstance(costs, int):
            costs = [costs // len(texts) + (i < costs % len(texts)) for i in range(len(texts))]
        future = asyncio.get_running_loop().create_future()
        job = _Job(texts, key, [self.count_tokens([t]) for t in texts], future, list(costs))
        self.queue.append(job)
        self.metrics.queued_sentences += len(job.texts)
        assert self._wake is not None, "Batcher.start() first"
        self._wake.set()
        try:
            return await future
        finally:
            if job in self.queue:  # cancelled (timeout, client gone): what was not handed out is never decoded
                self.queue.remove(job)
                self.metrics.queued_sentences -= len(job.texts) - job.taken

    def _tokens(self) -> int:
        return sum(sum(j.tokens[j.taken:]) for j in self.queue)

    def _fits(self, tokens: int, cost: int) -> bool:
        return tokens <= self.max_tokens and (self.slice_cost is None or cost <= self.slice_cost)

    def _take(self) -> list[tuple[_Job, int, int]]:
        """(job, first text, end) of the next decoding call: a slice of the first job, as many of its texts as
        fit in max_tokens and slice_cost (one at least), then every later job with its key whole, while it fits
        (first come, first served: the rest waits)."""
        waiting = [j for j in self.queue if not j.future.done()]
        if not waiting:
            return []
        batch: list[tuple[_Job, int, int]] = []
        tokens = cost = 0
        for job in waiting:
            if job.key != waiting[0].key:
                continue
            start = end = job.taken
            if not batch:
                while end < len(job.texts) and (end == start or self._fits(tokens + job.tokens[end],
                                                                           cost + job.costs[end])):
                    tokens, cost, end = tokens + job.tokens[end], cost + job.costs[end], end + 1
                batch.append((job, start, end))
                if end < len(job.texts):  # full: the rest of this job waits for a later call
                    break
            else:
                more, extra = sum(job.tokens[start:]), sum(job.costs[start:])
                if not self._fits(tokens + more, cost + extra):
                    break
                batch.append((job, start, len(job.texts)))
                tokens, cost = tokens + more, cost + extra
            if self.wait <= 0:  # merging off: one request per decoding call
                break
        for job, start, end in batch:
            job.taken = end
            self.metrics.queued_sentences -= end - start
        return batch

    def _drop(self, job: _Job) -> None:
        if job in self.queue:
            self.queue.remove(job)

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
            batch = self._take()
            if not batch:
                continue
            jobs = [job for job, _, _ in batch]
            texts = [t for job, start, end in batch for t in job.texts[start:end]]
            start_time = time.monotonic()
            self._token = token = Token()

            def gave_up(_: asyncio.Future, jobs: list[_Job] = jobs, token: Token = token) -> None:
                if all(j.future.done() for j in jobs):  # answered, timed out or left: nobody reads the rest
                    token.cancel("every request of its batch gave up")

            for job in jobs:
                job.future.add_done_callback(gave_up)
            try:
                outputs = await loop.run_in_executor(self.executor, self._timed, token, self.decode, texts,
                                                     jobs[0].key)
            except Exception as e:  # noqa: BLE001 (each request gets the error; the worker lives on)
                finished = time.monotonic()
                if isinstance(e, Cancelled):
                    self.metrics.cancelled_batches += 1  # shutdown, or every request gave up (none is left)
                    e = Cancelled(self.closed or "the server is shutting down")
                for job in jobs:
                    self._drop(job)
                    if not job.future.done():
                        job.future.set_exception(e)
                continue
            finally:
                self._token = None
                for job in jobs:
                    job.future.remove_done_callback(gave_up)
            finished = time.monotonic()
            self.metrics.batch_done(len(texts), len(jobs), finished - start_time)
            at = 0
            for job, start, end in batch:
                if not job.future.done():
                    job.outputs.extend(outputs[at: at + end - start])
                    self._drop(job)
                    if end == len(job.texts):
                        job.future.set_result(job.outputs)
                    else:  # a slice of a long request: the requests that came meanwhile go first
                        self.queue.append(job)
                at += end - start

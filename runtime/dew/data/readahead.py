"""Steps read in the training process, one after another, optionally with the next steps in flight.

A kind whose reads are plain copies (token windows off a memmap) reads in the caller's thread: one
trip through Grain's prefetching iterator costs about as much as the read, and reader threads in the
training process only contend with it for the GIL. Over gs:// a read waits on the network instead,
tens of milliseconds a request, and then the steps ahead are read in threads while the caller trains
on this one: the records of step k + n are a pure function of the position, so nothing is guessed.
How many steps: as many whole steps as Loading.read_buffer's records make (128 // a host's rows of a
step by default; 0, a read_buffer below one step's rows, reads only the step asked for).
"""

from __future__ import annotations

import concurrent.futures
import contextlib
import contextvars
import threading
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")


class Cancelled(Exception):
    """A read turned away because the stream that asked for it was closed."""


class Closing:
    """One stream's close, for the requests its reads queue in a pool shared with other streams
    (ranges._pool): close() cancels those not started yet, so a read waiting on them is turned away at
    once, and refuses new ones; a request already running finishes. Other streams' are untouched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._queued: set[concurrent.futures.Future[Any]] = set()

    def close(self) -> None:
        with self._lock:
            self._closed = True
            queued, self._queued = self._queued, set()
        for future in queued:
            future.cancel()  # False for one running or done: it is left to finish

    def submit(
        self, pool: concurrent.futures.Executor, work: Callable[..., _T], *args: Any
    ) -> concurrent.futures.Future[_T]:
        with self._lock:
            if self._closed:
                raise Cancelled("the data iterator that asked for this read was closed")
            future = pool.submit(work, *args)
            self._queued.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._queued.discard(future)


# The Closing of the stream whose read runs in this thread (stream._ShareRows), if any.
_CLOSING: contextvars.ContextVar[Closing | None] = contextvars.ContextVar("dew_read_closing", default=None)


@contextlib.contextmanager
def closed_by(closing: Closing) -> Iterator[None]:
    """Within it, what `pool_map` queues is cancelled by `closing.close()`."""
    token = _CLOSING.set(closing)
    try:
        yield
    finally:
        _CLOSING.reset(token)


def pool_map(pool: concurrent.futures.Executor, work: Callable[[Any], _T], items: Iterable[Any]) -> list[_T]:
    """[work(item) for item in items], run in `pool`. Within closed_by, a close raises Cancelled as soon as
    the work running for this read is done, never a part of the results; the rest is cancelled."""
    closing = _CLOSING.get()
    if closing is None:
        return list(pool.map(work, items))
    futures = [closing.submit(pool, work, item) for item in items]
    try:
        return [future.result() for future in futures]
    except concurrent.futures.CancelledError:
        raise Cancelled("the data iterator that asked for this read was closed") from None
    finally:
        for future in futures:
            future.cancel()  # after an error or a close: what has not started is not wanted


class InProcess:
    """Step `step` and on, read by `reads(step)` (None once it is closed) in the caller's thread, or with
    `ahead` > 0 up to `ahead` steps past the one handed over already being read in threads."""

    def __init__(self, reads: Callable[[int], Any], step: int, stop: int, *, ahead: int = 0) -> None:
        self.reads, self.step, self.stop, self.ahead = reads, step, stop, ahead
        self._pool = concurrent.futures.ThreadPoolExecutor(ahead, "dew-read-ahead") if ahead else None
        self._pending: dict[int, concurrent.futures.Future[Any]] = {}

    def __next__(self) -> Any:
        if self._pool is None:
            batch = self.reads(self.step)
        else:
            for step in range(self.step, min(self.stop, self.step + self.ahead + 1)):
                if step not in self._pending:
                    self._pending[step] = self._pool.submit(self.reads, step)
            batch = self._pending.pop(self.step).result()
        if batch is None:
            raise RuntimeError("this data iterator is closed")
        self.step += 1
        return batch

    def close(self) -> None:
        """Drops the steps read ahead; stream.Started.close turns away the requests their reads queued and
        waits out the ones in flight."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pending.clear()

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
from collections.abc import Callable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")
# Set while a stream's read runs (stream._ShareRows): set once the stream is closed.
_CLOSED: contextvars.ContextVar[threading.Event | None] = contextvars.ContextVar("dew_read_closed", default=None)


class Cancelled(Exception):
    """A read's queued request turned away because the stream that asked for it was closed."""


@contextlib.contextmanager
def cancelled_by(closed: threading.Event) -> Iterator[None]:
    """Within it, requests a read queues (ranges.read) are turned away once `closed` is set."""
    token = _CLOSED.set(closed)
    try:
        yield
    finally:
        _CLOSED.reset(token)


def unless_closed(work: Callable[..., _T]) -> Callable[..., _T]:
    """`work`, to queue in a shared pool: it raises Cancelled instead of starting once the stream of
    the read queuing it is closed. A request already running finishes; other streams' are untouched."""
    closed = _CLOSED.get()
    if closed is None:
        return work

    def guarded(*args: Any) -> _T:
        if closed.is_set():
            raise Cancelled("the data iterator that asked for this read was closed")
        return work(*args)

    return guarded


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

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
import functools
import socket
import threading
import time
from collections.abc import Callable, Iterable, Iterator
from typing import Any, TypeVar

_T = TypeVar("_T")


class Cancelled(Exception):
    """A read turned away because the stream that asked for it was closed."""


class Closing:
    """One stream's close, for the requests its reads queue in a pool shared with other streams
    (ranges._pool): close() cancels those not started yet, so a read waiting on them is turned away at
    once, and refuses new ones; a request already running is aborted (its socket shut down, see
    `abortable`), so a server that has stopped answering holds no close. Other streams' are untouched."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._closed = False
        self._queued: set[concurrent.futures.Future[Any]] = set()
        self._aborts: dict[int, Callable[[], None]] = {}
        self._shut = threading.Event()

    @property
    def closed(self) -> bool:
        return self._closed

    def close(self) -> None:
        with self._lock:
            self._closed = True
            self._shut.set()
            queued, self._queued = self._queued, set()
            # Under the lock: an exchange that has left `abortable` hands its socket back to a pool other
            # streams draw on, and must never be shut down after that.
            for abort in self._aborts.values():
                with contextlib.suppress(OSError):
                    abort()
            self._aborts.clear()
        for future in queued:
            future.cancel()  # False for one running or done: that one was aborted above, or is done

    def submit(
        self, pool: concurrent.futures.Executor, work: Callable[..., _T], *args: Any
    ) -> concurrent.futures.Future[_T]:
        with self._lock:
            if self._closed:
                raise Cancelled("the data iterator that asked for this read was closed")
            future = pool.submit(self._run, work, *args)
            self._queued.add(future)
        future.add_done_callback(self._done)
        return future

    def _done(self, future: concurrent.futures.Future[Any]) -> None:
        with self._lock:
            self._queued.discard(future)

    def _run(self, work: Callable[..., _T], *args: Any) -> _T:
        """`work(*args)` in a pool thread, knowing the stream it serves (for `abortable` and `pause`)."""
        outer, _SERVING.closing = getattr(_SERVING, "closing", None), self
        try:
            return work(*args)
        finally:
            _SERVING.closing = outer

    def _register(self, abort: Callable[[], None]) -> int:
        with self._lock:
            if self._closed:
                raise Cancelled("the data iterator that asked for this read was closed")
            key = id(abort)
            self._aborts[key] = abort
            return key

    def _unregister(self, key: int) -> None:
        with self._lock:
            self._aborts.pop(key, None)


# The Closing of the stream whose read runs in this thread (stream._ShareRows), if any.
_CLOSING: contextvars.ContextVar[Closing | None] = contextvars.ContextVar("dew_read_closing", default=None)
# The Closing of the stream a pool thread's request is for (Closing._run): pool threads do not inherit
# the context of the read that queued the request.
_SERVING = threading.local()


def _current() -> Closing | None:
    serving: Closing | None = getattr(_SERVING, "closing", None)
    return serving if serving is not None else _CLOSING.get()


def cancelled() -> bool:
    """Whether the stream this thread's work is for (if any) was closed: a request that failed then
    failed because it was aborted, and is not to be retried."""
    closing = _current()
    return closing is not None and closing.closed


@contextlib.contextmanager
def abortable(sock: socket.socket | None) -> Iterator[None]:
    """Within it, a close of the stream this thread's work is for shuts `sock` down, so the recv waiting
    on it returns at once; raises Cancelled on entry if that stream is closed already. Outside any
    stream, or without a socket, nothing."""
    closing = _current()
    if closing is None or sock is None:
        yield
        return
    key = closing._register(functools.partial(sock.shutdown, socket.SHUT_RDWR))
    try:
        yield
    finally:
        closing._unregister(key)


def pause(seconds: float, sleep: Callable[[float], None] = time.sleep) -> None:
    """sleep(seconds), cut short by a close of the stream this thread's work is for: then Cancelled."""
    closing = _current()
    if closing is None:
        sleep(seconds)
    elif closing._shut.wait(seconds):
        raise Cancelled("the data iterator that asked for this read was closed")


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
        aborts the range requests in flight."""
        if self._pool is not None:
            self._pool.shutdown(wait=False, cancel_futures=True)
            self._pending.clear()

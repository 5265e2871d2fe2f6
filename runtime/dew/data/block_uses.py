"""The last uses of block cache pages a process has read but not yet written to the host's ledger.

A read served wholly by the cache (dew.data.blockcache) writes nothing, so taking the ledger's write
lock just to mark its pages as used would cost more than the read: those marks are kept here, per
process, and written with the next store of any of its threads (before that store evicts, so its own
evictions see them) or by a read at least FLUSH_SECONDS after the last write of them. Until then
another process of the host evicting sees these pages as used when this one last wrote their marks:
the LRU lags by at most FLUSH_SECONDS (plus the time to a read) for pages only this process reads. A
lag costs at most a refetch of a page evicted a little early, never a wrong byte (every cached block is
checked as it is read); marks of a process that exits before writing them are lost the same way.
"""

from __future__ import annotations

import os
import threading
import time
from collections.abc import Iterable, Mapping

FLUSH_SECONDS = 1.0
_PENDING: dict[tuple[str, int], int] = {}  # (mirror, page) -> its last use (time.time_ns())
_LOCK = threading.Lock()
_WRITTEN = [time.monotonic()]  # when this process last wrote its marks


def _forked() -> None:  # the parent writes its own marks; a lock held by a thread at a fork stays held
    global _LOCK
    _LOCK = threading.Lock()
    _PENDING.clear()


os.register_at_fork(after_in_child=_forked)


def note(touched: Mapping[str, Iterable[int]], now: int) -> None:
    """Marks the pages `touched` (mirror path -> pages) as used at `now`, in memory."""
    with _LOCK:
        for path, pages in touched.items():
            for page in pages:
                _PENDING[(path, page)] = now


def due() -> bool:
    """Whether marks are waiting and the last write of them is FLUSH_SECONDS old."""
    return bool(_PENDING) and time.monotonic() - _WRITTEN[0] >= FLUSH_SECONDS


def take() -> list[tuple[int, str, int]]:
    """The waiting marks as (used, path, page) rows, no longer waiting (put_back if they fail to be written)."""
    with _LOCK:
        rows = [(used, path, page) for (path, page), used in _PENDING.items()]
        _PENDING.clear()
        _WRITTEN[0] = time.monotonic()
    return rows


def put_back(rows: Iterable[tuple[int, str, int]]) -> None:
    """Marks a failed write took, waiting again (a later mark of a page wins)."""
    with _LOCK:
        for used, path, page in rows:
            if _PENDING.get((path, page), -1) < used:
                _PENDING[(path, page)] = used

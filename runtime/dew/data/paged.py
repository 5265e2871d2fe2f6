"""FileArray: a large read-only 1-D array in a file, read a few pages at a time with pread.

A derived index (piece ends, document ends, packing plans) holds 8 bytes or more a record: gigabytes
for a pod-scale corpus. A batch needs only the entries of its own records, so a reader must neither
load the file whole (time and memory grow with the corpus, in every process of every host) nor map it:
a mapped file's pages count in the process's RSS as soon as they are touched, and recent Linux kernels
map a whole large folio (up to 2 MB) of page cache for each scattered lookup, so RSS then grows with
every batch and with the corpus. A FileArray instead reads the entries asked for with pread, one read per
run of consecutive entries, into arrays of the caller's own; what a process holds is those arrays and
the first probes of its binary searches (FileArray.PROBES at most), whatever the file's size, and the
file's pages stay in the page cache the host's processes share.

What it supports is what the readers need: len, shape, dtype; an int, a slice or an integer array as
index (out-of-range refused as numpy would); searchsorted by a binary search over the file. Anything
else goes through np.asarray, which reads the file whole: planning and tests may, a reader's batch path
must not (FileArray.whole_reads counts it, and tests check it stays 0 while batches are read).

A FileArray pickles as where it lies (path, offset, dtype, length and the file's identity), so a
worker process opens the same file rather than receiving a copy of it; a worker refuses a file that
changed after its parent opened it.
"""

from __future__ import annotations

import dataclasses
import os
import threading
import weakref
from typing import Any, Literal

import numpy as np

PAGE = 4096


@dataclasses.dataclass(frozen=True)
class Where:
    """Where an array's bytes lie in a file, and which state of the file they were found in."""

    path: str
    offset: int
    dtype: str
    length: int
    identity: tuple[int, int, int]


def identity(path: str) -> tuple[int, int, int]:
    """The state of a file, as (inode, size, mtime): a rewritten file gives another."""
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


class FileArray:
    """A read-only 1-D array of `where.length` items of `where.dtype` at `where.offset` in `where.path`."""

    PROBES = 1 << 16  # binary-search probes remembered per array (8 bytes each for int64)
    whole_reads = 0  # times any FileArray was read whole, process-wide (see the module docstring)

    def __init__(self, where: Where) -> None:
        self.where = where
        self.dtype = np.dtype(where.dtype)
        self.shape = (where.length,)
        self._probes: dict[int, Any] = {}
        self._lock = threading.Lock()
        self._fd: int | None = None

    # -- what numpy code asks of an array ------------------------------------------------------------
    ndim = 1

    @property
    def size(self) -> int:
        return self.where.length

    @property
    def nbytes(self) -> int:
        return self.where.length * self.dtype.itemsize

    def __len__(self) -> int:
        return self.where.length

    def __repr__(self) -> str:
        return f"FileArray({self.where.path!r}, offset={self.where.offset}, dtype={self.dtype}, length={len(self)})"

    def __array__(self, dtype: Any = None, copy: Any = None) -> np.ndarray:
        FileArray.whole_reads += 1
        whole = self._span(0, len(self))
        return whole if dtype is None else whole.astype(dtype)

    def astype(self, dtype: Any) -> np.ndarray:
        return np.asarray(self).astype(dtype)

    def sum(self, dtype: Any = None) -> Any:
        return np.asarray(self).sum(dtype=dtype)

    def tolist(self) -> list[Any]:
        return np.asarray(self).tolist()

    def __reduce__(self) -> Any:
        return _reopen, (self.where,)

    def __getitem__(self, key: Any) -> Any:
        if isinstance(key, int | np.integer):
            index = int(key)
            if not -len(self) <= index < len(self):
                raise IndexError(f"index {index} is out of bounds for a paged array of {len(self)} items")
            return self._span(index % len(self), index % len(self) + 1)[0]
        if isinstance(key, slice):
            start, stop, step = key.indices(len(self))
            if step == 1:
                return self._span(start, stop)
            return self._gather(np.arange(start, stop, step, dtype=np.int64))
        indices = np.asarray(key)
        if indices.dtype == np.bool_ or not np.issubdtype(indices.dtype, np.integer):
            return np.asarray(self)[key]
        return self._gather(indices)

    def searchsorted(self, values: Any, side: Literal["left", "right"] = "left") -> Any:
        """np.searchsorted over this (sorted) array: a binary search whose first probes, the same for every
        search, are remembered, then one read of the last 512 candidates."""
        if side not in ("left", "right"):
            raise ValueError(f"side must be 'left' or 'right', got {side!r}")
        wanted = np.asarray(values)
        found = np.array([self._search(v, side) for v in wanted.reshape(-1).tolist()], dtype=np.int64)
        return int(found[0]) if wanted.ndim == 0 else found.reshape(wanted.shape)

    # -- reading ---------------------------------------------------------------------------------------
    def _search(self, value: Any, side: Literal["left", "right"]) -> int:
        low, high = 0, len(self)
        while high - low > 512:
            middle = (low + high) // 2
            item = self._probes.get(middle)
            if item is None:
                item = self._span(middle, middle + 1)[0]
                if len(self._probes) >= self.PROBES:
                    self._probes.clear()
                self._probes[middle] = item
            if item < value or (side == "right" and item == value):
                low = middle + 1
            else:
                high = middle
        return low + int(np.searchsorted(self._span(low, high), value, side=side))

    def _gather(self, index: np.ndarray) -> np.ndarray:
        """The items at `index`: one read per run of consecutive items asked for (a window's pieces are
        one run), or one read of the whole range when the runs lie closer than a few pages apart."""
        flat = index.astype(np.int64, copy=False).reshape(-1)
        if not flat.size:
            return np.zeros(index.shape, dtype=self.dtype)
        low, high = int(flat.min()), int(flat.max())
        if low < -len(self) or high >= len(self):
            raise IndexError(f"index {high if high >= len(self) else low} is out of bounds for a paged array of "
                             f"{len(self)} items")  # fmt: skip
        if low < 0:
            flat = np.where(flat < 0, flat + len(self), flat)
            low, high = int(flat.min()), int(flat.max())
        wanted, inverse = np.unique(flat, return_inverse=True)
        breaks = np.flatnonzero(np.diff(wanted) != 1) + 1
        if (high - low + 1) * self.dtype.itemsize <= (len(breaks) + 1) * 4 * PAGE:
            return self._span(low, high + 1)[flat - low].reshape(index.shape)
        firsts = wanted[np.concatenate(([0], breaks))].tolist()
        counts = np.diff(np.concatenate(([0], breaks, [len(wanted)]))).tolist()
        buffer = bytearray(len(wanted) * self.dtype.itemsize)
        view, at = memoryview(buffer), 0
        for first, count in zip(firsts, counts, strict=True):
            size = count * self.dtype.itemsize
            self._fill(view[at : at + size], first)
            at += size
        return np.frombuffer(buffer, dtype=self.dtype)[inverse.reshape(-1)].reshape(index.shape)

    def _span(self, start: int, stop: int) -> np.ndarray:
        """Items start..stop straight from the file."""
        if stop <= start:
            return np.zeros(0, dtype=self.dtype)
        buffer = bytearray((stop - start) * self.dtype.itemsize)
        self._fill(memoryview(buffer), start)
        return np.frombuffer(buffer, dtype=self.dtype)

    def _fill(self, view: memoryview, start: int) -> None:
        at, done = self.where.offset + start * self.dtype.itemsize, 0
        fd = self._file()
        while done < len(view):
            n = os.preadv(fd, [view[done:]], at + done)
            if n <= 0:
                raise ValueError(
                    f"{self.where.path} ends before the {len(self)} items its header describes (truncated after "
                    "it was checked); delete it and rerun the job that wrote it"
                )
            done += n

    def _file(self) -> int:
        if self._fd is None:
            with self._lock:
                if self._fd is None:
                    fd = os.open(self.where.path, os.O_RDONLY | getattr(os, "O_CLOEXEC", 0))
                    weakref.finalize(self, os.close, fd)
                    self._fd = fd
        return self._fd


def _reopen(where: Where) -> FileArray:
    """The array `where` describes, in a worker process; refused if the file changed since it was opened."""
    if identity(where.path) != where.identity:
        raise ValueError(
            f"{where.path} changed after this process's parent opened it; restart the run so every process reads "
            "one version of it"
        )
    return FileArray(where)


def asanyarray(value: Any) -> Any:
    """np.asanyarray, except that a FileArray stays itself (np.asanyarray would read it whole)."""
    return value if isinstance(value, FileArray) else np.asanyarray(value)

"""The whole-object cache of gs:// files, bounded on disk at every moment by $DEW_CACHE_BYTES.

ArrayRecord and memmap read local paths only, so a remote file that is not read by range
(dew.data.ranges) is downloaded once into this cache: under a per-object lock (safe across the
worker processes of a host), to a temporary name, checked against the object's crc32c (transfer) and
against the size and sha256 that meta.json records (content), then renamed into place. A later open
of the same object with the same checksum is a cache hit once the cached bytes still match the
crc32c recorded beside them.

Honest about disk: a file a reader has open keeps its disk after an unlink (POSIX), so a file is
never deleted while a reader holds it. A caller that keeps a fetched file open passes a `holder`
(the object whose life is the file's use: a reader, a memmap) and the file is pinned, by a shared
flock on an open descriptor, until the holder is garbage collected. Eviction (least recently used
first, under one host-wide lock) deletes only files it can lock exclusively, and counts the rest,
pinned ones included, against the budget; a download reserves its whole size (fallocate) before its
first byte, so downloads in flight count too. When pinned files leave no room, the process first asks
its own holders to let go (their `close` drops their handles: a reader opens the file again on its
next read), then waits a bounded time for other processes' pins to go, and then refuses by name.
Requests, retries and the cache's place and budget are dew.data.remote's.
"""

from __future__ import annotations

import contextlib
import dataclasses
import fcntl
import hashlib
import io
import os
import re
import threading
import time
import warnings
import weakref
from collections.abc import Callable, Iterator
from typing import Any, BinaryIO, cast

from dew.data.remote import (
    _BLOCK,
    OVERWRITE,
    DamagedError,
    _download,
    _stat,
    cache_budget,
    cache_dir,
)
from dew.data.retries import retry_seconds, retrying

# Beside each cached file: the crc32c of the bytes verified at download, hex.
_CRC_SUFFIX = ".crc32c"
# The cache's own entries: one directory a cached object, named by its key (fetch).
_KEY = re.compile(r"^[0-9a-f]{24}$")
_WAIT = 0.5
# Cached files this process has checked, with the (inode, size, mtime) it saw them at.
_CHECKED: dict[str, tuple[int, int, int]] = {}
_PINS: dict[str, list[_Pin]] = {}
_PINS_LOCK = threading.RLock()


@dataclasses.dataclass(eq=False)
class _Pin:
    """One holder's hold on a cached file: a descriptor with a shared flock, released when the holder goes."""

    fd: int
    close: Callable[[], None] | None
    finalizer: weakref.finalize | None = None

    def release(self, local: str) -> None:
        with _PINS_LOCK:
            held = _PINS.get(local, [])
            if self in held:
                held.remove(self)
                if not held:
                    _PINS.pop(local, None)
            with contextlib.suppress(OSError):
                os.close(self.fd)


@contextlib.contextmanager
def _locked(path: str, *, blocking: bool = True) -> Iterator[bool]:
    with open(path + ".lock", "a") as lock:
        try:
            fcntl.flock(lock, fcntl.LOCK_EX | (0 if blocking else fcntl.LOCK_NB))
        except BlockingIOError:
            yield False
            return
        try:
            yield True
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def _crc32c_file(path: str) -> str:
    import google_crc32c

    crc = google_crc32c.Checksum()
    with open(path, "rb") as f:
        while block := f.read(_BLOCK):
            crc.update(block)
    return crc.digest().hex()


def _intact(local: str, size: int | None) -> bool:
    """Whether the cached `local` still holds the bytes that were verified when it was downloaded.

    Rereading a shard on every open would cost as much as the read itself, so a process trusts a file
    it has checked until its inode, size or modification time changes.
    """
    try:
        stat = os.stat(local)
        with open(local + _CRC_SUFFIX) as f:
            recorded = f.read().strip()
    except FileNotFoundError:
        return False
    if size is not None and stat.st_size != size:
        return False
    identity = (stat.st_ino, stat.st_size, stat.st_mtime_ns)
    if _CHECKED.get(local) == identity:
        return True
    if _crc32c_file(local) != recorded:
        warnings.warn(f"the cached copy {local} changed on disk after download; fetching it again", stacklevel=3)
        return False
    _CHECKED[local] = identity
    return True


def fetch(
    uri: str,
    *,
    size: int | None = None,
    sha256: str | None = None,
    holder: object | None = None,
    close: Callable[[], None] | None = None,
) -> str:
    """The local path of `uri`, downloading it into the cache unless an intact, identical copy is there.

    `size` and `sha256` (from meta.json) identify the content: a cached copy is used only when it
    matches, and an object that does not match is refused with an error naming it. With `holder`, the
    file stays on disk until `holder` is garbage collected (see pin); without, a caller reads it at once.
    """
    key = hashlib.sha256(f"{uri}\0{sha256 or ''}".encode()).hexdigest()[:24]
    directory = os.path.join(cache_dir(), key)
    os.makedirs(directory, exist_ok=True)
    local = os.path.join(directory, os.path.basename(uri))
    with _locked(local):
        if _intact(local, size):
            # Access time marks it most recently used; the modification time stays what _intact compares.
            os.utime(local, ns=(time.time_ns(), os.stat(local).st_mtime_ns))
        else:
            _download_into(uri, local, size=size, sha256=sha256)
        if holder is not None:  # under the object's lock, which eviction takes too: nothing goes between
            pin(local, holder, close)
    return local


def _download_into(uri: str, local: str, *, size: int | None, sha256: str | None) -> None:
    _remove_cached(local)
    try:
        found = retrying(uri, lambda: _stat(uri))
    except FileNotFoundError:
        raise FileNotFoundError(f"{uri} is listed in meta.json but missing; {OVERWRITE}") from None
    if size is not None and found.size != size:
        raise DamagedError(f"{uri} holds {found.size} bytes but meta.json records {size}; {OVERWRITE}")
    tmp = f"{local}.part-{os.getpid()}"
    try:
        _reserve(tmp, found.size)
        with open(tmp, "r+b") as raw:
            target = cast(BinaryIO, _Reserved(raw))
            crc, digest = retrying(uri, lambda: _download(uri, found, target, sha256=sha256 is not None))
        if sha256 is not None and digest != sha256:
            raise DamagedError(f"{uri} fails its sha256 check against meta.json; {OVERWRITE}")
        with open(local + _CRC_SUFFIX, "w") as f:
            f.write(crc)
        os.replace(tmp, local)
        _CHECKED[local] = _identity(local)
    finally:
        with contextlib.suppress(FileNotFoundError):
            os.remove(tmp)


class _Reserved(io.RawIOBase):
    """The download's file, whose truncate (at the start of each attempt) keeps its allocation: each
    attempt writes the object again from byte 0, and only one that wrote all of it is kept."""

    def __init__(self, raw: BinaryIO) -> None:
        super().__init__()
        self._raw = raw

    def writable(self) -> bool:
        return True

    def write(self, data: Any) -> int:
        return self._raw.write(data)

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        return self._raw.seek(offset, whence)

    def tell(self) -> int:
        return self._raw.tell()

    def truncate(self, size: int | None = None) -> int:
        return self._raw.tell() if size is None else size


class Hold:
    """A holder for the time between a fetch and the handle that then holds the file: fetch with one,
    pin the file to the handle, and let the Hold go."""


def closer(owner: object, method: str, *args: Any) -> Callable[[], None]:
    """A `close` for pin that calls owner.method(*args) while `owner` lives, holding it weakly: a close
    that held its owner would keep the holder, and the file, for as long as the process runs."""
    ref = weakref.ref(owner)

    def close() -> None:
        found = ref()
        if found is not None:
            getattr(found, method)(*args)

    return close


def pin(local: str, holder: object, close: Callable[[], None] | None = None) -> Callable[[], None]:
    """Keeps the cached file `local` on disk while `holder` lives; returns a call that releases it early.

    `close`, if given, drops the caller's handles on the file (so `holder` can go): this process calls
    it when the cache needs the room, least recently used first, and the caller reopens the file by
    fetch on its next read. A holder still referenced after `close` (a view another part of the program
    keeps) keeps its file, and the cache goes on counting it. `close` must not hold what holds
    `holder` (see closer).
    """
    fd = os.open(local, os.O_RDONLY)
    try:
        fcntl.flock(fd, fcntl.LOCK_SH)
        if os.fstat(fd).st_ino != os.stat(local).st_ino:
            raise FileNotFoundError(f"{local} was replaced while it was being pinned")
    except BaseException:
        os.close(fd)
        raise
    held = _Pin(fd, close)
    held.finalizer = weakref.finalize(holder, held.release, local)
    with _PINS_LOCK:
        _PINS.setdefault(local, []).append(held)
    return held.finalizer


def _identity(path: str) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _remove_cached(local: str) -> None:
    _CHECKED.pop(local, None)
    for path in (local, local + _CRC_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _entries() -> tuple[list[tuple[float, str]], int]:
    """(atime, path) of every cached file, and the disk every file of the cache takes (st_blocks: cached
    files, their checksums, downloads in flight), the block cache and other state left out."""
    root, files, held = cache_dir(), [], 0
    with contextlib.suppress(FileNotFoundError):
        for entry in os.scandir(root):
            if not (entry.is_dir() and _KEY.match(entry.name)):
                continue
            for item in os.scandir(entry.path):
                with contextlib.suppress(FileNotFoundError):
                    stat = item.stat()
                    held += stat.st_blocks * 512
                    if not item.name.endswith((".lock", _CRC_SUFFIX)) and ".part-" not in item.name:
                        files.append((stat.st_atime, item.path))
    return sorted(files), held


def held_bytes() -> int:
    """The disk the whole-object cache takes now, in allocated bytes (files a reader has open included:
    they are never deleted under it)."""
    return _entries()[1]


def _cost(size: int) -> int:
    """Disk `size` bytes may take as a cached file and its checksum: whole filesystem blocks."""
    block = os.statvfs(cache_dir()).f_bsize
    return -(-size // block) * block + block


def _evict_one(path: str) -> int:
    """Deletes a cached file nobody holds, returning the disk freed (0 when it is held or being fetched)."""
    with _locked(path, blocking=False) as free:
        if not free:
            return 0
        try:
            fd = os.open(path, os.O_RDONLY)
        except FileNotFoundError:
            return 0
        try:
            try:
                fcntl.flock(fd, fcntl.LOCK_EX | fcntl.LOCK_NB)
            except BlockingIOError:
                return 0  # pinned by a reader, here or in another process
            freed = os.fstat(fd).st_blocks * 512
            with contextlib.suppress(FileNotFoundError):
                freed += os.stat(path + _CRC_SUFFIX).st_blocks * 512
            _remove_cached(path)
            return freed
        finally:
            os.close(fd)


def _let_go(files: list[tuple[float, str]]) -> bool:
    """Asks this process's holders of `files` (least recently used first) to drop their handles; whether any did."""
    asked = False
    for _, path in files:
        with _PINS_LOCK:
            closers = [p.close for p in _PINS.get(path, []) if p.close is not None]
        for close in closers:
            close()
            asked = True
    return asked


def _reserve(tmp: str, size: int) -> None:
    """Creates the download's file `tmp` with its `size` bytes allocated, once room is made for them.

    Room is made under the host-wide lock, which is let go between tries: a process waiting for others
    to release their files does not stop them from reading on, and releasing."""
    deadline = time.monotonic() + retry_seconds()
    while True:
        with _locked(os.path.join(cache_dir(), "whole")):
            if _make_room(size, final=time.monotonic() > deadline):
                with open(tmp, "wb") as target:  # allocated before its first byte: the next _make_room counts it
                    if size:
                        os.posix_fallocate(target.fileno(), 0, size)
                return
        time.sleep(_WAIT)


def _make_room(incoming: int, *, final: bool) -> bool:
    """Frees disk until `incoming` more bytes fit in the budget: files nobody holds least recently used
    first, then those this process's holders let go. False when other processes' files are in the way
    (they may let go soon); refused by name when nothing else can, or on the `final` try."""
    budget, need = cache_budget(), _cost(incoming)
    files: list[tuple[float, str]] = []
    for asked in (False, True):
        if asked and not _let_go(files):
            break
        files, held = _entries()
        for _, path in files:
            if held + need <= budget:
                return True
            held -= _evict_one(path)
        if held + need <= budget:
            return True
    left = [path for _, path in _entries()[0]]
    mine = sum(1 for path in left if path in _PINS)
    if need <= budget and mine < len(left) and not final:
        return False
    why = (
        f"{held} bytes of it are {len(left)} files readers hold open ({mine} in this process)"
        if need <= budget
        else f"with its checksum, it takes {need} bytes on disk"
    )
    raise OSError(
        f"the dew cache {cache_dir()} cannot fit {incoming} bytes in its {budget}-byte budget (DEW_CACHE_BYTES): "
        f"{why}; raise DEW_CACHE_BYTES to hold every shard open at once, or read shards by range (dew.data.ranges)"
    )

"""The whole-object cache of gs:// files: ArrayRecord and memmap read local paths only, so a remote file
that is not read by range (dew.data.ranges) is downloaded once into a bounded local cache.

Under a per-object lock (safe across the Grain worker processes of one host), to a temporary name,
checked against the object's crc32c (transfer) and against the size and sha256 that meta.json records
(content), then renamed into place. A later open of the same object with the same checksum is a cache
hit once the cached bytes still match the crc32c recorded beside them. When the cache outgrows its
budget the least recently used files go first; a reader that still has one open keeps its data (POSIX
unlink semantics), which is why range reads keep their own, hole-punched cache (dew.data.blockcache).
Requests, retries and the cache's place and budget are dew.data.remote's.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
import time
import warnings
from collections.abc import Iterator

from dew.data.remote import (
    _BLOCK,
    OVERWRITE,
    DamagedError,
    _download,
    _retrying,
    _stat,
    cache_budget,
    cache_dir,
)

# Beside each cached file: the crc32c of the bytes verified at download, hex.
_CRC_SUFFIX = ".crc32c"
# Cached files this process has checked, with the (inode, size, mtime) it saw them at.
_CHECKED: dict[str, tuple[int, int, int]] = {}


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
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


def fetch(uri: str, *, size: int | None = None, sha256: str | None = None) -> str:
    """The local path of `uri`, downloading it into the cache unless an intact, identical copy is there.

    `size` and `sha256` (from meta.json) identify the content: a cached copy is used only when it
    matches, and an object that does not match is refused with an error naming it.
    """
    key = hashlib.sha256(f"{uri}\0{sha256 or ''}".encode()).hexdigest()[:24]
    directory = os.path.join(cache_dir(), key)
    os.makedirs(directory, exist_ok=True)
    local = os.path.join(directory, os.path.basename(uri))
    with _locked(local):
        if _intact(local, size):
            # Access time marks it most recently used; the modification time stays what _intact compares.
            os.utime(local, ns=(time.time_ns(), os.stat(local).st_mtime_ns))
            return local
        _remove_cached(local)
        try:
            found = _retrying(uri, lambda: _stat(uri))
        except FileNotFoundError:
            raise FileNotFoundError(f"{uri} is listed in meta.json but missing; {OVERWRITE}") from None
        if size is not None and found.size != size:
            raise DamagedError(f"{uri} holds {found.size} bytes but meta.json records {size}; {OVERWRITE}")
        _make_room(found.size)
        tmp = f"{local}.part-{os.getpid()}"
        try:
            with open(tmp, "wb") as target:
                crc, digest = _retrying(uri, lambda: _download(uri, found, target, sha256=sha256 is not None))
            if sha256 is not None and digest != sha256:
                raise DamagedError(f"{uri} fails its sha256 check against meta.json; {OVERWRITE}")
            with open(local + _CRC_SUFFIX, "w") as f:
                f.write(crc)
            os.replace(tmp, local)
            _CHECKED[local] = _identity(local)
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    return local


def _identity(path: str) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _remove_cached(local: str) -> None:
    _CHECKED.pop(local, None)
    for path in (local, local + _CRC_SUFFIX):
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)


def _make_room(incoming: int) -> None:
    """Deletes least recently used cached files until `incoming` more bytes fit in the budget."""
    root, budget = cache_dir(), cache_budget()
    files = []
    for directory, subdirectories, names in os.walk(root):
        if directory == root and "blocks" in subdirectories:
            subdirectories.remove("blocks")  # blocks_dir(), which keeps its own ledger
        for name in names:
            if name.endswith((".lock", _CRC_SUFFIX)) or ".part-" in name:
                continue
            path = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                stat = os.stat(path)
                files.append((stat.st_atime, stat.st_size, path))
    used = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if used + incoming <= budget:
            break
        _remove_cached(path)
        used -= size
    if used + incoming > budget:
        raise OSError(f"the dew cache {root} cannot fit {incoming} bytes in its {budget}-byte budget (DEW_CACHE_BYTES)")

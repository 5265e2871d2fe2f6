"""gs:// objects as local files: ArrayRecord and memmap read local paths only.

A remote shard is downloaded once into a bounded local cache: under a per-object lock (safe across
the Grain worker processes of one host), to a temporary name, checked against the size and sha256
that meta.json records, then renamed into place. A later open of the same object with the same
checksum is a cache hit. When the cache outgrows its budget the least recently used files go first;
a reader that still has one open keeps its data (POSIX unlink semantics).

The cache lives in $DEW_CACHE_DIR (default ~/.cache/dew) and holds at most $DEW_CACHE_BYTES bytes
(default 64 GiB). A gcsfuse mount needs none of this: give the mount path instead of the gs:// URI.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Iterator
from typing import Any

from dew.data.extras import require

_DEFAULT_BUDGET = 64 << 30


def is_remote(path: str) -> bool:
    return str(path).startswith("gs://")


def cache_dir() -> str:
    return os.environ.get("DEW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dew")


def cache_budget() -> int:
    return int(os.environ.get("DEW_CACHE_BYTES", _DEFAULT_BUDGET))


def _filesystem() -> Any:
    # gcsfs's default class probes each bucket's type over gRPC (zonal and HNS buckets), which a
    # plain bucket does not need and which retries for minutes against an emulator; the core class
    # speaks JSON only. It follows STORAGE_EMULATOR_HOST itself, which is how tests reach a local one.
    core = require("gcsfs.core", for_what="reading gs:// paths")
    return core.GCSFileSystem(token="anon") if os.environ.get("STORAGE_EMULATOR_HOST") else core.GCSFileSystem()


def exists(uri: str) -> bool:
    return bool(_filesystem().exists(uri))


def list_names(uri: str) -> list[str]:
    """The names of the objects directly under the gs:// prefix `uri`."""
    return [os.path.basename(p.rstrip("/")) for p in _filesystem().ls(uri, detail=False)]


def find(uri: str) -> list[str]:
    """Every object under the gs:// prefix `uri`, at any depth, as gs:// URIs in name order."""
    return sorted(f"gs://{path}" for path in _filesystem().find(uri))


def read_bytes(uri: str) -> bytes:
    """A small object (meta.json) read whole, uncached: it is what says whether the cache is current."""
    try:
        with _filesystem().open(uri, "rb") as f:
            return f.read()
    except FileNotFoundError:
        raise FileNotFoundError(f"{uri} does not exist") from None


@contextlib.contextmanager
def _locked(path: str) -> Iterator[None]:
    with open(path + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)


def fetch(uri: str, *, size: int | None = None, sha256: str | None = None) -> str:
    """The local path of `uri`, downloading it into the cache unless an identical copy is there.

    `size` and `sha256` (from meta.json) identify the content: a cached copy is used only when it
    matches, and a download that does not match is discarded with an error naming the object.
    """
    key = hashlib.sha256(f"{uri}\0{sha256 or ''}".encode()).hexdigest()[:24]
    directory = os.path.join(cache_dir(), key)
    os.makedirs(directory, exist_ok=True)
    local = os.path.join(directory, os.path.basename(uri))
    with _locked(local):
        if os.path.exists(local) and (size is None or os.path.getsize(local) == size):
            os.utime(local)  # most recently used
            return local
        _make_room(size or 0)
        tmp = f"{local}.part-{os.getpid()}"
        digest = hashlib.sha256()
        try:
            with _filesystem().open(uri, "rb") as source, open(tmp, "wb") as target:
                while block := source.read(1 << 22):
                    digest.update(block)
                    target.write(block)
            got = os.path.getsize(tmp)
            if size is not None and got != size:
                raise ValueError(f"{uri} holds {got} bytes but meta.json records {size}; rerun the preprocess job")
            if sha256 is not None and digest.hexdigest() != sha256:
                raise ValueError(f"{uri} fails its sha256 check against meta.json; rerun the preprocess job")
            os.replace(tmp, local)
        except FileNotFoundError:
            raise FileNotFoundError(f"{uri} is listed in meta.json but missing; rerun the preprocess job") from None
        finally:
            with contextlib.suppress(FileNotFoundError):
                os.remove(tmp)
    return local


def _make_room(incoming: int) -> None:
    """Deletes least recently used cached files until `incoming` more bytes fit in the budget."""
    root, budget = cache_dir(), cache_budget()
    files = []
    for directory, _, names in os.walk(root):
        for name in names:
            if name.endswith(".lock") or ".part-" in name:
                continue
            path = os.path.join(directory, name)
            with contextlib.suppress(FileNotFoundError):
                stat = os.stat(path)
                files.append((stat.st_mtime, stat.st_size, path))
    used = sum(size for _, size, _ in files)
    for _, size, path in sorted(files):
        if used + incoming <= budget:
            break
        with contextlib.suppress(FileNotFoundError):
            os.remove(path)
            used -= size
    if used + incoming > budget:
        raise OSError(f"the dew cache {root} cannot fit {incoming} bytes in its {budget}-byte budget (DEW_CACHE_BYTES)")

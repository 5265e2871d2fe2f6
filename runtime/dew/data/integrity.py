"""Checking that a local file holds the bytes its writer committed, at most once per host per file state.

meta.json records each shard's sha256 and, from writers with google-crc32c, its crc32c (≈4× cheaper to
compute here, and what GCS keeps per object). Hashing a shard on every open would cost every worker
process of every host a full read, so a verdict is cached: one small file per (path, size, mtime,
ctime, inode, device, checksum kind) under $DEW_CACHE_DIR/verified, holding the checksum that matched.
Any write to the file changes its ctime, which nobody can set back, so a file rewritten in place (even
with its mtime restored) is hashed again. Worker processes of a host share the cache; a per-entry lock
makes the second one wait for the first one's hash instead of hashing too.

The checks guard against damage and mistakes (bit rot, a truncated copy, a shard overwritten by hand),
not against someone who can also rewrite meta.json. DEW_VERIFY=0 turns them off for trusted storage.
"""

from __future__ import annotations

import contextlib
import fcntl
import hashlib
import os
from collections.abc import Callable, Iterable, Iterator
from typing import Any, Protocol

from dew.data import remote

VERIFY_ENV = "DEW_VERIFY"
_CHUNK = 1 << 22


def enabled() -> bool:
    """Whether local files are checked against their checksums (DEW_VERIFY, default on)."""
    return os.environ.get(VERIFY_ENV, "1").strip().lower() not in ("0", "false", "no", "off")


def _crc32c() -> Any:
    try:
        import google_crc32c
    except ImportError:
        return None
    return google_crc32c


# The block checksums writers record beside each shard: crc32c of every BLOCK_BYTES bytes (the last
# block may be shorter), which a reader fetching a byte range checks the blocks it covers against.
BLOCK_BYTES = 4096
# .bin token shards: a training window (seq_len + 1 ids) is read at a random place, and a window of
# 2049 uint16 ids is 4098 bytes, so with 4 KiB blocks nearly every window fetches two blocks, twice
# its bytes. With 256-byte blocks it fetches 17 (1.06x), for a .blocks file of 1.6% of the shard
# (benchmarks/bench_gcs_ranges.py measures the sizes against each other; docs/runtime.md the table).
TOKEN_BLOCK_BYTES = 256


def block_bytes_for(name: str) -> int:
    """The block size a writer records block checksums of for the shard file `name` (meta.json keeps
    it per shard, so readers take whatever a corpus was written with)."""
    return TOKEN_BLOCK_BYTES if name.endswith(".bin") else BLOCK_BYTES


class Digest:
    """sha256, and crc32c when google-crc32c is installed, of bytes fed in order; with `block_bytes`,
    also the crc32c of each block of that many bytes (`blocks`, big-endian uint32s)."""

    def __init__(self, block_bytes: int = 0) -> None:
        self._sha256 = hashlib.sha256()
        self._module = _crc32c()
        self._crc = 0
        self.block_bytes = block_bytes if self._module is not None else 0
        self._blocks = bytearray()
        self._block_crc = 0
        self._block_fill = 0

    def update(self, block: bytes) -> None:
        self._sha256.update(block)
        if self._module is not None:
            self._crc = self._module.extend(self._crc, block)
        if self.block_bytes:
            view = memoryview(block)
            while view:
                take = min(len(view), self.block_bytes - self._block_fill)
                self._block_crc = self._module.extend(self._block_crc, bytes(view[:take]))
                self._block_fill += take
                view = view[take:]
                if self._block_fill == self.block_bytes:
                    self._end_block()

    def _end_block(self) -> None:
        self._blocks += self._block_crc.to_bytes(4, "big")
        self._block_crc = self._block_fill = 0

    @property
    def blocks(self) -> bytes:
        """The block checksums so far, the partial last block included; b"" without block_bytes."""
        if self._block_fill:
            return bytes(self._blocks) + self._block_crc.to_bytes(4, "big")
        return bytes(self._blocks)

    @property
    def sha256(self) -> str:
        return self._sha256.hexdigest()

    @property
    def crc32c(self) -> str:
        """Eight hex digits, or "" without google-crc32c (meta.json then records none)."""
        return f"{self._crc:08x}" if self._module is not None else ""


def has_crc32c() -> bool:
    """Whether google-crc32c is installed (block checksums need it)."""
    return _crc32c() is not None


def crc32c_value(data: bytes) -> int:
    """crc32c of `data` (needs google-crc32c)."""
    return int(_crc32c().value(data))


def crc32c_values(chunks: Iterable[bytes]) -> list[int]:
    """crc32c of each of `chunks` (needs google-crc32c): crc32c_value's, the function looked up once."""
    value = _crc32c().value
    return [value(chunk) for chunk in chunks]


def digest_bytes(data: bytes) -> str:
    """crc32c of `data` as eight hex digits (needs google-crc32c)."""
    return f"{_crc32c().value(data):08x}"


def digests(path: str) -> tuple[str, str]:
    """(sha256, crc32c) of a local file; crc32c is "" without google-crc32c."""
    digest = Digest()
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            digest.update(block)
    return digest.sha256, digest.crc32c


def digest_file(path: str, algorithm: str, feed: Callable[[bytes], None] | None = None) -> str:
    """One checksum of a local file: "sha256", or "crc32c" (which needs google-crc32c); `feed`, if
    given, is handed every chunk read, in order."""
    sha256, module, crc = hashlib.sha256(), _crc32c(), 0
    with open(path, "rb") as f:
        while block := f.read(_CHUNK):
            if feed is not None:
                feed(block)
            if algorithm == "sha256":
                sha256.update(block)
            else:
                crc = module.extend(crc, block)
    return sha256.hexdigest() if algorithm == "sha256" else f"{crc:08x}"


class Pass(Protocol):
    """A check of a reader's own that rides on a local file's checksum pass, so the file is read once for
    both: fed the file's bytes in order; `name` and `expected` join the cached verdict's key and value;
    `finish()`, after the last byte, raises DamagedError unless the file passes, and returns `expected`."""

    name: str
    expected: str

    def update(self, chunk: bytes) -> None: ...

    def finish(self) -> str: ...


def verify_file(path: str, *, sha256: str, crc32c: str = "", also: Pass | None = None) -> None:
    """Raises ValueError, naming the file and the fix, unless `path` holds the committed bytes (and
    passes `also`, checked in the same read and cached with it).

    Uses crc32c when meta.json records one and google-crc32c is installed, else sha256. A no-op with
    DEW_VERIFY=0.
    """
    if not enabled():
        return
    algorithm, expected = ("crc32c", crc32c) if crc32c and _crc32c() is not None else ("sha256", sha256)
    fix = "against meta.json: the shard was damaged or rewritten after the commit; rerun the preprocess job with "
    fix += "--overwrite"
    if also is None:
        verify_once(path, algorithm, expected, lambda: digest_file(path, algorithm), fix=fix)
        return

    def both() -> str:
        if digest_file(path, algorithm, also.update) != expected:
            raise remote.DamagedError(f"{path} fails its {algorithm} check {fix}")
        return f"{expected} {also.finish()}"

    verify_once(path, f"{algorithm} {also.name}", f"{expected} {also.expected}", both, fix=fix)


def verify_once(
    path: str, algorithm: str, expected: str, digest: Callable[[], str], *, fix: str, ctime: bool = True
) -> None:
    """Raises ValueError unless `digest()` of the local file `path` is `expected`, computing it at most
    once per host per file state: the verdict is cached under `algorithm`, which names what `digest`
    computes. `fix` follows "fails its <algorithm> check" in the error.

    ctime=False leaves the change time out of the file state, for shard_cache.fetch's cached copies: the
    cache touches a copy's times on every use, and replaces (never rewrites) a copy it refetches.
    """
    stat = os.stat(path)
    changed = stat.st_ctime_ns if ctime else 0
    parts = (os.path.realpath(path), stat.st_size, stat.st_mtime_ns, changed, stat.st_ino, stat.st_dev)
    key = "\0".join(str(part) for part in (*parts, algorithm))
    entry = os.path.join(remote.cache_dir(), "verified", hashlib.sha256(key.encode()).hexdigest()[:32])
    if _verdict(entry) == expected:
        return
    os.makedirs(os.path.dirname(entry), exist_ok=True)
    with _locked(entry):
        if _verdict(entry) == expected:  # another worker of this host hashed it while we waited
            return
        if digest() != expected:
            raise remote.DamagedError(f"{path} fails its {algorithm} check {fix}")
        tmp = f"{entry}.tmp-{os.getpid()}"
        with open(tmp, "w") as f:
            f.write(expected)
        os.replace(tmp, entry)


def _verdict(entry: str) -> str | None:
    try:
        with open(entry) as f:
            return f.read()
    except FileNotFoundError:
        return None


@contextlib.contextmanager
def _locked(entry: str) -> Iterator[None]:
    with open(entry + ".lock", "a") as lock:
        fcntl.flock(lock, fcntl.LOCK_EX)
        try:
            yield
        finally:
            fcntl.flock(lock, fcntl.LOCK_UN)

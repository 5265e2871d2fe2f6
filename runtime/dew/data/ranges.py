"""Reading committed gs:// shards by byte range: a batch costs the blocks its records lie in.

A shard whose meta.json entry records block checksums (formats.Shard.block_bytes) is never fetched
whole. A read names byte ranges of shards; they are rounded out to whole blocks, the blocks this
host's block cache (dew.data.blockcache) holds are read from it, and the rest are fetched with HTTP
Range requests: runs of adjacent blocks coalesced into one request of at most _MAX_RUN bytes, up to
$DEW_GCS_REQUESTS (default 32) requests of a process in flight at once, each under remote's retry
policy (429 with Retry-After, 5xx, resets, short bodies). Every block, fetched or cached, is checked
against its crc32c before any of its bytes is handed out; a block that fails again after
_CRC_TRIES fetches is damage, refused naming the shard and the block.

The block checksums of a shard (`<shard>.blocks`, 4 bytes a block) of the two-level layout (version 2,
dew.data.block_sums) are read by range: its top level once per process while a bounded cache holds it
(the one index read per shard), then the groups of checksums covering the blocks a read needs. Those of
a corpus written before it (version 1) are read whole once per process when it first reads that shard,
checked against meta.json's blocks_crc32c, and kept.
"""

from __future__ import annotations

import concurrent.futures
import dataclasses
import functools
import hashlib
import io
import os
import threading
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import block_sums, blockcache, formats, http_ranges, integrity, mirrors, readahead, remote, retries

_MAX_RUN = 8 << 20
_CRC_TRIES = 3
_POOL: tuple[int, concurrent.futures.ThreadPoolExecutor] | None = None
_SUMS: dict[str, np.ndarray] = {}
_LOCK = threading.Lock()
# One a shard and process (a lock held by a thread at a fork stays held in the child): concurrent
# reads, the stream's read-ahead among them, fetch a shard's .blocks once.
_SUMS_LOCKS: dict[tuple[int, str], threading.Lock] = {}


@dataclasses.dataclass
class Counters:
    """What this process asked of object storage through range reads: requests and body bytes, and the
    index reads (block checksum files whole, or their top levels; record indexes, footers); `asked` is
    the bytes callers asked `read` for (cached or not), which `bytes` exceeds by the blocks' rounding and
    falls short of by what the cache held; `sums_reads` and `sums_bytes` the requests for groups of
    block checksums (version 2 `.blocks`) beyond a top level's read, and their bytes."""

    requests: int = 0
    bytes: int = 0
    asked: int = 0
    index_reads: int = 0
    index_bytes: int = 0
    sums_reads: int = 0
    sums_bytes: int = 0

    def add(self, **counts: int) -> None:
        with _LOCK:
            for name, value in counts.items():
                setattr(self, name, getattr(self, name) + value)


FETCHED = Counters()


def _pool() -> concurrent.futures.ThreadPoolExecutor:
    global _POOL
    if _POOL is None or _POOL[0] != os.getpid():  # threads do not survive a fork
        _POOL = (os.getpid(), concurrent.futures.ThreadPoolExecutor(remote.requests_in_flight(), "dew-range"))
    return _POOL[1]


@dataclasses.dataclass(frozen=True)
class RangedShard:
    """A committed gs:// shard that can be read by range: its URI and its meta.json entry."""

    uri: str
    shard: formats.Shard
    # A raw file (dew.data.record_footer): no block checksums, keyed and fetched by its object generation;
    # its reader checks what it reads by the file's own hashes.
    generation: str | None = None

    def __post_init__(self) -> None:
        if not self.shard.block_bytes:
            raise ValueError(f"{self.uri}: meta.json records no block checksums, so it is read whole")

    @property
    def block_bytes(self) -> int:
        return self.shard.block_bytes

    def __hash__(self) -> int:
        # A read keys its dicts by shard, about 19 hashes an image: the dataclass's own hash would hash
        # the whole meta.json entry each time. Equal shards have equal keys, so the two agree.
        return hash(self.key)

    @functools.cached_property  # hashed once: every block read and checked asks for it
    def key(self) -> str:
        version = self.shard.sha256 if self.generation is None else f"generation {self.generation}"
        # The checksum layout too: the same bytes rewritten with other blocks have other block checksums,
        # which a process holding the old ones by this key would take for damage.
        layout = f"{self.block_bytes}\0{self.shard.blocks_version}"
        return hashlib.sha256(f"{self.uri}\0{version}\0{layout}".encode()).hexdigest()[:24]

    def mirror(self) -> str:
        return blockcache.mirror(self.key, self.shard.name, self.block_bytes)

    def block_size(self, block: int) -> int:
        return min(self.block_bytes, self.shard.bytes - block * self.block_bytes)

    def sums(self) -> np.ndarray:
        """A version 1 shard's block checksums, read once per process and checked against meta.json."""
        sums = _SUMS.get(self.key)
        if sums is not None:
            return sums
        with _LOCK:
            lock = _SUMS_LOCKS.setdefault((os.getpid(), self.key), threading.Lock())
        with lock:
            sums = _SUMS.get(self.key)
            if sums is None:
                sums = _SUMS[self.key] = self._read_sums()
            return sums

    def _read_sums(self) -> np.ndarray:
        where = self.uri + formats.BLOCKS_SUFFIX
        try:
            raw = remote.read_bytes(where)
        except FileNotFoundError:
            raise formats.DamagedError(f"{where} is missing; {remote.OVERWRITE}") from None
        FETCHED.add(index_reads=1, index_bytes=len(raw))
        count = -(-self.shard.bytes // self.block_bytes)
        if len(raw) != 4 * count or integrity.digest_bytes(raw) != self.shard.blocks_crc32c:
            raise formats.DamagedError(f"{where} fails its check against meta.json; {remote.OVERWRITE}")
        return np.frombuffer(raw, dtype=">u4").astype(np.uint32)

    def block_crcs(self, first: int, last: int) -> list[int]:
        """The crc32c recorded for each of blocks first..last: of a version 2 shard from the groups
        dew.data.block_sums holds (fetched and checked if not), else from sums()."""
        if self.shard.blocks_version == block_sums.BLOCKS_VERSION:
            return block_sums.block_crcs(self, first, last)
        return self.sums()[first : last + 1].tolist()

    def good_blocks(self, blocks: Mapping[int, bytes]) -> dict[int, bytes]:
        """Of blocks read from the cache (index to bytes), those of their full size whose crc32c is the
        recorded one (a raw file's: of their size alone). The checksums are looked up once a run of
        adjacent blocks, not once a block: a 4 KiB window of 256-byte blocks is one lookup, not 16."""
        full, end = self.block_bytes, self.shard.bytes
        tail = (end - 1) // full  # the last block, which may be shorter: block_size's sizes, inline
        sized = sorted(
            b for b, data in blocks.items() if len(data) == (full if b < tail else min(full, end - b * full))
        )
        if self.generation is not None:
            return {b: blocks[b] for b in sized}
        have = dict(zip(sized, integrity.crc32c_values([blocks[b] for b in sized]), strict=True))
        good = {}
        for first, last in _adjacent(sized):
            for block, want in zip(range(first, last + 1), self.block_crcs(first, last), strict=True):
                if have[block] == want:
                    good[block] = blocks[block]
        return good


def _adjacent(blocks: list[int]) -> list[tuple[int, int]]:
    """Sorted distinct block indexes as (first, last) runs of adjacent ones."""
    runs: list[tuple[int, int]] = []
    for block in blocks:
        if runs and runs[-1][1] == block - 1:
            runs[-1] = (runs[-1][0], block)
        else:
            runs.append((block, block))
    return runs


def is_ranged(shard: formats.Shard) -> bool:
    """Whether a shard is read by range: its writer recorded block checksums, google-crc32c (which checks
    them) is installed, they are of a layout this dew knows, and $DEW_GCS_RANGES is not 0 (which fetches
    every shard whole, as before)."""
    wanted = os.environ.get("DEW_GCS_RANGES", "1").strip().lower() not in ("0", "false", "no", "off")
    known = shard.blocks_version in (0, block_sums.BLOCKS_VERSION)
    return wanted and bool(shard.block_bytes) and known and integrity.has_crc32c()


def read(requests: Sequence[tuple[RangedShard, int, int]], *, fresh: bool = False) -> list[bytes]:
    """The bytes [lo, hi) of each (shard, lo, hi), every block they lie in checked first; `fresh`: every
    block fetched again, none taken from the cache (which is rewritten with them), for a reader that
    refused what it read (a raw file's blocks have no checksum here: a body that lied is kept otherwise)."""
    need: dict[RangedShard, set[int]] = {}
    FETCHED.add(asked=sum(hi - lo for _, lo, hi in requests))
    for shard, lo, hi in requests:
        if not 0 <= lo <= hi <= shard.shard.bytes:
            raise IndexError(f"{shard.uri}: bytes {lo}..{hi} are outside its {shard.shard.bytes}")
        if hi > lo:
            need.setdefault(shard, set()).update(range(lo // shard.block_bytes, (hi - 1) // shard.block_bytes + 1))
    checked = [s for s in need if s.generation is None]
    grouped = [(s, need[s]) for s in checked if s.shard.blocks_version == block_sums.BLOCKS_VERSION]
    unknown = [s for s in checked if s.key not in _SUMS and s.shard.blocks_version != block_sums.BLOCKS_VERSION]
    # A closed stream's queued requests are turned away (readahead.Cancelled), never handed out in part.
    readahead.pool_map(_pool(), RangedShard.sums, unknown)  # the index reads of shards new to this process, at once
    block_sums.prepare(lambda work, items: readahead.pool_map(_pool(), work, items), grouped)
    got: dict[RangedShard, dict[int, bytes]] = {}
    paths = {shard: shard.mirror() for shard in need}
    pages_of = {s: mirrors.page_blocks(s.block_bytes) for s in need}
    touched = {paths[s]: {b // pages_of[s] for b in blocks} for s, blocks in need.items()}
    held_of = blockcache.held(touched)  # one ledger query for every mirror of the read
    runs = []
    for shard, blocks in need.items():
        path, per_page = paths[shard], pages_of[shard]
        pages = held_of[path]
        held = [] if fresh else [b for b in blocks if b % per_page in pages[b // per_page]]
        cached = mirrors.read_blocks(path, held, shard.block_bytes)
        got[shard] = shard.good_blocks(cached)
        runs.extend(_runs(shard, sorted(blocks - set(got[shard]))))
    writes: dict[str, dict[int, bytes]] = {}
    for shard, fetched in readahead.pool_map(_pool(), lambda run: (run[0], _fetch(*run)), runs):
        got[shard].update(fetched)
        writes.setdefault(paths[shard], {}).update(fetched)
    block_bytes = {paths[s]: s.block_bytes for s in need}
    blockcache.store(writes, block_bytes, touched)
    out = []
    for shard, lo, hi in requests:
        if hi == lo:
            out.append(b"")
            continue
        first, last = lo // shard.block_bytes, (hi - 1) // shard.block_bytes
        blocks_of = got[shard]  # once a request: a RangedShard hashes its whole meta.json entry
        joined = blocks_of[first] if first == last else b"".join([blocks_of[b] for b in range(first, last + 1)])
        at = first * shard.block_bytes
        out.append(joined[lo - at : hi - at])
    return out


def _runs(shard: RangedShard, blocks: list[int]) -> list[tuple[RangedShard, int, int]]:
    """Sorted missing blocks as (shard, first, last) runs of adjacent blocks, each at most _MAX_RUN bytes."""
    runs: list[tuple[RangedShard, int, int]] = []
    most = max(1, _MAX_RUN // shard.block_bytes)
    for block in blocks:
        if runs and runs[-1][2] == block - 1 and block - runs[-1][1] < most:
            runs[-1] = (shard, runs[-1][1], block)
        else:
            runs.append((shard, block, block))
    return runs


def _fetch(shard: RangedShard, first: int, last: int) -> dict[int, bytes]:
    """Blocks first..last of a shard, by one Range request (retried), each checked against its crc32c.

    The body is exactly the range asked (dew.data.http_ranges frames it, or the attempt is retried), so
    every block has its size; a block file's crc32c is checked for each, in one pass."""
    size = shard.block_bytes
    lo, hi = first * size, min(shard.shard.bytes, (last + 1) * size)
    target = http_ranges.target(shard.uri, shard.generation)
    failures, misses = [0], [0]

    def attempt() -> dict[int, bytes]:
        try:
            body = remote.get_range(shard.uri, target, lo, hi)
        except BaseException as error:
            FETCHED.add(requests=1)
            misses[0] += 1
            if shard.generation is None:  # a raw file is read at its generation, which never changes
                remote.refuse_if_resized(shard.uri, shard.shard.bytes, error, misses[0])
            raise
        FETCHED.add(requests=1, bytes=len(body))
        blocks = {first + i: bytes(body[at : at + size]) for i, at in enumerate(range(0, hi - lo, size))}
        if shard.generation is not None:
            return blocks  # a raw file's reader checks its bytes by the file's own hashes
        values, sums = integrity.crc32c_values(blocks.values()), shard.block_crcs(first, last)
        bad = [b for b, have, want in zip(blocks, values, sums, strict=True) if have != want]
        if bad:
            failures[0] += 1
            message = f"{shard.uri}: block {bad[0]} (bytes from {bad[0] * size}) fails its crc32c"
            if failures[0] >= _CRC_TRIES:
                raise formats.DamagedError(f"{message} in {failures[0]} fetches; {remote.OVERWRITE}")
            raise retries.Transient(message)
        return blocks

    try:
        return retries.retrying(shard.uri, attempt)
    except FileNotFoundError:
        if shard.generation is not None:
            raise FileNotFoundError(
                f"{shard.uri}: generation {shard.generation}, which this process began reading, is gone: the "
                "file was overwritten or deleted since; read it again from a new process"
            ) from None
        raise FileNotFoundError(f"{shard.uri} is listed in meta.json but missing; {remote.OVERWRITE}") from None


def read_pieces(
    shards: Sequence[RangedShard], ends: np.ndarray, dtype: np.dtype, starts: Sequence[int], lengths: Sequence[int]
) -> list[np.ndarray]:
    """ids [start, start + length) of a stream held in `shards` (ending at ids `ends`) for each pair, in
    one read, so the ranges of every piece, in every shard, are fetched together."""
    requests, parts = [], []
    item = dtype.itemsize
    for start, length in zip(starts, lengths, strict=True):
        stop, at, count = start + length, start, 0
        shard = int(np.searchsorted(ends, start, side="right"))
        while at < stop:
            base = int(ends[shard - 1]) if shard else 0
            end = min(stop, int(ends[shard]))
            requests.append((shards[shard], (at - base) * item, (end - base) * item))
            at, shard, count = end, shard + 1, count + 1
        parts.append(count)
    got = iter(read(requests))
    return [np.frombuffer(b"".join(next(got) for _ in range(count)), dtype=dtype) for count in parts]


def read_spans(
    shards: Sequence[RangedShard], ends: np.ndarray, dtype: np.dtype, starts: np.ndarray, length: int
) -> np.ndarray:
    """[len(starts), length] ids of a stream held in `shards`: read_pieces of equal lengths."""
    first: list[int] = np.asarray(starts, dtype=np.int64).tolist()
    rows = read_pieces(shards, ends, dtype, first, [length] * len(first))
    return np.stack(rows) if rows else np.empty((0, length), dtype=dtype)


class RangedFile(io.RawIOBase):
    """A read-only file over a gs:// shard read by range, for readers that take file objects (pyarrow):
    each read fetches (or takes from the cache) only the blocks it covers, checked."""

    def __init__(self, shard: RangedShard) -> None:
        super().__init__()
        self.shard, self.name, self._at = shard, shard.uri, 0

    def readable(self) -> bool:
        return True

    def seekable(self) -> bool:
        return True

    def tell(self) -> int:
        return self._at

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:
        base = {io.SEEK_SET: 0, io.SEEK_CUR: self._at, io.SEEK_END: self.shard.shard.bytes}[whence]
        self._at = max(0, base + offset)
        return self._at

    def readinto(self, buffer: Any) -> int:
        count = max(0, min(len(buffer), self.shard.shard.bytes - self._at))
        if count:
            (data,) = read([(self.shard, self._at, self._at + count)])
            memoryview(buffer).cast("B")[:count] = data
            self._at += count
        return count

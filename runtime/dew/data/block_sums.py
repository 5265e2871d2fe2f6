"""Block checksums read by range: the two-level `<shard>.blocks` layout and a bounded cache of it.

Version 1 (meta.json records no `blocks_version`): `.blocks` is the crc32c of every block_bytes bytes of
the shard, big-endian uint32s, and blocks_crc32c is the file's crc32c. A reader can check it only whole,
so dew.data.ranges reads it once per process and keeps it: 1.6% of a shard of 256-byte blocks.

Version 2 (BLOCKS_VERSION): the same checksums, then a top level: the crc32c of each group of
`group_blocks(block_bytes)` consecutive checksums (the checksums of GROUP_SPAN bytes of the shard, one
block-cache page: 1 KiB of them for 256-byte blocks, 64 bytes for 4 KiB ones), big-endian uint32s; and
blocks_crc32c is the crc32c of the top level alone (4 bytes a 64 KiB of shard). meta.json protects the
top level, the top level each group, each group its blocks. A reader fetches the top level by range
once (with the groups near it, in the same request), then only the groups covering the blocks it needs,
runs of them coalesced, each checked before any of its checksums is used. Checked top levels and groups
are kept in one least-recently-used cache a process of at most $DEW_CHECKSUM_BYTES (default 32 MiB);
what it evicted is fetched (and checked) again when needed. A group is fetched by one request at a time:
a read that needs a group another read is fetching waits for that fetch, and gets its checksums or its
error, rather than asking again.
"""

from __future__ import annotations

import collections
import os
import threading
from collections.abc import Callable, Container, Iterable, Sequence
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import formats, http_ranges, integrity, remote, retries

if TYPE_CHECKING:
    from dew.data.ranges import RangedShard

BLOCKS_VERSION = 2
GROUP_SPAN = 64 << 10
CHECKSUM_BYTES_ENV = "DEW_CHECKSUM_BYTES"
_DEFAULT_LIMIT = 32 << 20
# Checksum bytes not needed that a request takes along rather than costing another request, and the
# most one request asks for.
_GAP = 2 << 10
_MAX_RUN = 8 << 20
_CRC_TRIES = 3
_TOP = -1  # the cache's group number of a shard's top level


def group_blocks(block_bytes: int) -> int:
    """The block checksums in one group of a version 2 `.blocks` file."""
    return max(1, GROUP_SPAN // block_bytes)


def _crcs(data: bytes, step: int) -> bytes:
    return b"".join(integrity.crc32c_value(data[at : at + step]).to_bytes(4, "big") for at in range(0, len(data), step))


def sidecar(sums: bytes, block_bytes: int) -> tuple[bytes, str]:
    """(the content of a version 2 `.blocks` file, meta.json's blocks_crc32c) for a shard's block checksums."""
    top = _crcs(sums, 4 * group_blocks(block_bytes))
    return sums + top, integrity.digest_bytes(top)


def limit() -> int:
    """The most bytes of checksums this process keeps ($DEW_CHECKSUM_BYTES)."""
    return int(os.environ.get(CHECKSUM_BYTES_ENV, _DEFAULT_LIMIT))


class _Flight:
    """One fetch of a group in flight: the read that claimed it settles it, reads needing it meanwhile wait."""

    def __init__(self) -> None:
        self.done = threading.Event()
        self.error: BaseException | None = None
        self.waiters = 0  # reads waiting on it (under the cache's lock)

    def wait(self, lock: threading.Lock) -> None:
        with lock:
            self.waiters += 1
        self.done.wait()
        if self.error is not None:
            raise self.error


class _Lru:
    """Checked top levels and groups by (shard key, group), least recently used evicted first; the newest
    is kept even when it alone is over the limit. `flights`: the groups being fetched now, by whom."""

    def __init__(self) -> None:
        self.items: collections.OrderedDict[tuple[str, int], np.ndarray] = collections.OrderedDict()
        self.held = 0
        self.lock = threading.Lock()
        self.flights: dict[tuple[str, int], _Flight] = {}

    def claim(self, key: str, groups: Iterable[int]) -> tuple[dict[int, _Flight], dict[int, _Flight]]:
        """Of `groups` not held: those the caller is to fetch (now in flight under its claim), and those
        other reads have in flight, with their fetches."""
        mine: dict[int, _Flight] = {}
        theirs: dict[int, _Flight] = {}
        with self.lock:
            for group in groups:
                if (key, group) in self.items:
                    self.items.move_to_end((key, group))
                elif (flight := self.flights.get((key, group))) is not None:
                    theirs[group] = flight
                else:
                    mine[group] = self.flights[(key, group)] = _Flight()
        return mine, theirs

    def settle(self, key: str, claims: dict[int, _Flight], error: BaseException | None) -> None:
        """Ends the claims still open of `claims`: their waiters go on, with `error` if one."""
        ended = []
        with self.lock:
            for group, flight in claims.items():
                if self.flights.get((key, group)) is flight:
                    ended.append(self.flights.pop((key, group)))
        for flight in ended:
            flight.error = error
            flight.done.set()

    def get(self, key: tuple[str, int]) -> np.ndarray | None:
        with self.lock:
            found = self.items.get(key)
            if found is not None:
                self.items.move_to_end(key)
            return found

    def put(self, key: tuple[str, int], sums: np.ndarray) -> None:
        with self.lock:
            old = self.items.pop(key, None)
            self.held += sums.nbytes - (old.nbytes if old is not None else 0)
            self.items[key] = sums
            most = limit()
            while self.held > most and len(self.items) > 1:
                self.held -= self.items.popitem(last=False)[1].nbytes


_CACHE: tuple[int, _Lru] | None = None
_LOCKS: dict[tuple[int, str], threading.Lock] = {}
_LOCKS_LOCK = threading.Lock()


def cache() -> _Lru:
    """This process's cache (a lock held by a thread at a fork would stay held in the child)."""
    global _CACHE
    if _CACHE is None or _CACHE[0] != os.getpid():
        _CACHE = (os.getpid(), _Lru())
    return _CACHE[1]


def held() -> tuple[int, int]:
    """(entries, bytes) of checksums this process holds: top levels and groups."""
    lru = cache()
    with lru.lock:
        return len(lru.items), lru.held


class _Layout:
    """Where a version 2 shard's groups and top level lie in its `.blocks`."""

    def __init__(self, shard: RangedShard) -> None:
        self.shard, self.uri = shard, shard.uri + formats.BLOCKS_SUFFIX
        self.per_group = group_blocks(shard.block_bytes)
        self.count = -(-shard.shard.bytes // shard.block_bytes)
        self.groups = -(-self.count // self.per_group)
        self.top_at = 4 * self.count

    def span(self, group: int) -> tuple[int, int]:
        return 4 * group * self.per_group, 4 * min(self.count, (group + 1) * self.per_group)


def forget() -> None:
    """Empties this process's cache (a measure or a test that must fetch again)."""
    global _CACHE
    _CACHE = None


def block_crcs(shard: RangedShard, first: int, last: int) -> list[int]:
    """The crc32c recorded for each of blocks first..last of a version 2 shard, each group fetched and
    checked if not held."""
    per_group = group_blocks(shard.block_bytes)
    out: list[int] = []
    for group in range(first // per_group, last // per_group + 1):
        sums = cache().get((shard.key, group))
        if sums is None:  # evicted since the read's prepare, or a caller that did not prepare
            layout = _Layout(shard)
            top = _top(layout, {group})
            sums = cache().get((shard.key, group))
            if sums is None:  # fetched here, in a thread of the pool: a fetch in flight is not waited for
                lru = cache()
                mine, _ = lru.claim(shard.key, [group])
                try:
                    _fetch(layout, top, [(group, group)])
                finally:
                    lru.settle(shard.key, mine, None)
                sums = cache().get((shard.key, group))
            assert sums is not None
        base = group * per_group
        out.extend(sums[max(first, base) - base : min(last, base + per_group - 1) - base + 1].tolist())
    return out


PoolMap = Callable[[Callable[[Any], Any], Iterable[Any]], list[Any]]  # [work(item) for item in items], in a pool


def prepare(pool_map: PoolMap, needs: Sequence[tuple[RangedShard, Iterable[int]]]) -> None:
    """Makes the checksums of the blocks each shard needs held: the top levels not held first (each
    with the groups near its end, at once), then every other group missing and not in flight, by runs,
    together; then waits for those other reads are fetching (and raises what failed them)."""
    wanted = [(_Layout(shard), {b // group_blocks(shard.block_bytes) for b in blocks}) for shard, blocks in needs]
    lru = cache()
    held_tops = [lru.get((layout.shard.key, _TOP)) for layout, _ in wanted]
    unread = [item for item, top in zip(wanted, held_tops, strict=True) if top is None]  # no hand-off if none
    fetched = iter(pool_map(lambda item: _top(*item), unread) if unread else [])
    tops = [top if top is not None else next(fetched) for top in held_tops]
    runs: list[tuple[_Layout, np.ndarray, tuple[int, int], dict[int, _Flight]]] = []
    claimed: list[tuple[str, dict[int, _Flight]]] = []
    waits: list[_Flight] = []
    for (layout, groups), top in zip(wanted, tops, strict=True):
        mine, theirs = lru.claim(layout.shard.key, sorted(groups))
        claimed.append((layout.shard.key, mine))
        waits.extend(theirs.values())
        for run in _runs(layout, sorted(mine), theirs):
            runs.append((layout, top, run, {g: mine[g] for g in range(run[0], run[1] + 1) if g in mine}))

    def fetch(run: tuple[_Layout, np.ndarray, tuple[int, int], dict[int, _Flight]]) -> None:
        layout, top, groups, claims = run
        try:
            _fetch(layout, top, [groups])
        except BaseException as error:
            lru.settle(layout.shard.key, claims, error)
            raise
        lru.settle(layout.shard.key, claims, None)

    try:
        pool_map(fetch, runs)
    finally:  # a run never started (this read's stream closed, another run failed): its waiters fetch it
        for key, mine in claimed:
            lru.settle(key, mine, None)
    for flight in waits:
        flight.wait(lru.lock)


def _runs(layout: _Layout, groups: list[int], flying: Container[int] = ()) -> list[tuple[int, int]]:
    """Sorted groups as (first, last) runs, joined across gaps of under _GAP bytes holding no group of
    `flying` (another read's fetch has it), each under _MAX_RUN."""
    runs: list[tuple[int, int]] = []
    for group in groups:
        if runs:
            lo, gap = layout.span(runs[-1][0])[0], layout.span(group)[0] - layout.span(runs[-1][1])[1]
            near = gap <= _GAP and layout.span(group)[1] - lo <= _MAX_RUN
            if near and not any(g in flying for g in range(runs[-1][1] + 1, group)):
                runs[-1] = (runs[-1][0], group)
                continue
        runs.append((group, group))
    return runs


def _top(layout: _Layout, groups: set[int]) -> np.ndarray:
    """A shard's checked top level, fetched once per process while held (concurrent reads wait for the
    first), with the groups of `groups` within _GAP of it in the same request."""
    key = layout.shard.key
    top = cache().get((key, _TOP))
    if top is not None:
        return top
    with _LOCKS_LOCK:
        lock = _LOCKS.setdefault((os.getpid(), key), threading.Lock())
    with lock:
        top = cache().get((key, _TOP))
        if top is None:
            near = [g for g in groups if layout.top_at - layout.span(g)[0] <= _GAP]
            top = _fetch(layout, None, [(min(near), layout.groups - 1)] if near else [])
        return top


def _fetch(layout: _Layout, top: np.ndarray | None, runs: list[tuple[int, int]]) -> np.ndarray:
    """Fetches one range of the `.blocks` file: the groups of `runs` (one run), and the top level after
    them when `top` is None (checked against meta.json first); checks each group against the top level
    and holds them all. Returns the top level."""
    from dew.data import ranges

    first, last = runs[0] if runs else (layout.groups, layout.groups - 1)
    lo = layout.span(first)[0] if runs else layout.top_at
    hi = layout.top_at + 4 * layout.groups if top is None else layout.span(last)[1]
    failures, misses = [0], [0]

    def attempt() -> np.ndarray:
        try:
            body = _get_range(layout.uri, lo, hi)
        except BaseException as error:
            misses[0] += 1
            remote.refuse_if_resized(layout.uri, layout.top_at + 4 * layout.groups, error, misses[0])
            raise
        if len(body) != hi - lo:  # a .blocks shorter than its shard's checksums
            return _damaged(failures, f"{layout.uri}: bytes {lo}-{hi - 1} answered with {len(body)} of {hi - lo}")
        if top is None:
            ranges.FETCHED.add(index_reads=1, index_bytes=len(body))
        else:
            ranges.FETCHED.add(sums_reads=1, sums_bytes=len(body))
        checked = top
        if checked is None:
            raw = body[layout.top_at - lo :]
            if integrity.digest_bytes(raw) != layout.shard.shard.blocks_crc32c:
                return _damaged(failures, f"{layout.uri}: its top level fails its check against meta.json")
            checked = np.frombuffer(raw, dtype=">u4").astype(np.uint32)
        groups = {}
        for group in range(first, last + 1):
            start, end = layout.span(group)
            data = body[start - lo : end - lo]
            if integrity.crc32c_value(data) != int(checked[group]):
                return _damaged(failures, f"{layout.uri}: checksum group {group} fails its check against its top level")
            groups[group] = np.frombuffer(data, dtype=">u4").astype(np.uint32)
        if top is None:
            cache().put((layout.shard.key, _TOP), checked)
        for group, sums in groups.items():
            cache().put((layout.shard.key, group), sums)
        return checked

    try:
        return retries.retrying(layout.uri, attempt)
    except FileNotFoundError:
        raise formats.DamagedError(f"{layout.uri} is missing; {remote.OVERWRITE}") from None


def _get_range(uri: str, lo: int, hi: int) -> bytes:
    """Bytes [lo, hi) of an object by one Range request (dew.data.http_ranges frames it exactly)."""
    return bytes(remote.get_range(uri, http_ranges.target(uri, None), lo, hi)) if hi > lo else b""


def _damaged(failures: list[int], message: str) -> np.ndarray:
    """A check failed: fetched again (a body damaged on the way), until _CRC_TRIES say the same."""
    failures[0] += 1
    if failures[0] >= _CRC_TRIES:
        raise formats.DamagedError(f"{message} in {failures[0]} fetches; {remote.OVERWRITE}")
    raise retries.Transient(message)

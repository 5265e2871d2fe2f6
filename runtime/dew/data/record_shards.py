"""ArrayRecord shards read by record index, each opened on its first read in the process that reads it.

A local shard (or a raw file) is opened where it lies, a committed one checked against meta.json once
per host first (formats.verify_shard). A gs:// shard whose meta.json entry records block checksums and
a record index (record_index) is never fetched whole: its index is read once per process (checked
against meta.json), then a batch fetches through the host's block cache (dew.data.ranges) only the
blocks of the ranges an ArrayRecordReader reads on open, for shards new to this process, and of the
chunks of the batch's records, all shards' ranges in one concurrent read, every block checked against
its crc32c. The reader then reads the shard's sparse mirror in the cache, which holds those blocks.
A byte it reads from a hole (a page evicted since, by this process or another) is zeros, which fail
Riegeli's chunk and block header hashes: the read is refetched and retried once with a fresh reader,
and a second failure is refused by name, never handed out.
"""

from __future__ import annotations

import dataclasses
import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats, integrity, ranges, record_footer, remote, shard_cache
from dew.data.committed import open_array_record
from dew.data.formats import Shard
from dew.data.record_index import INDEX_VERSION, RecordIndex, index_name

_INDEXES: dict[str, RecordIndex] = {}


def is_indexed(shard: Shard) -> bool:
    """Whether a gs:// shard is read by record: range reads are on (ranges.is_ranged) and its writer
    recorded a record index of a version this reader knows."""
    return ranges.is_ranged(shard) and shard.index_version == INDEX_VERSION


def record_index(shard: ranges.RangedShard) -> RecordIndex | record_footer.RawIndex:
    """The shard's record index, read once per process and checked against meta.json (a raw file's
    from its own footer: dew.data.record_footer)."""
    if shard.generation is not None:
        return record_footer.index(shard)
    index = _INDEXES.get(shard.key)
    if index is None:
        where = index_name(shard.uri)
        try:
            raw = remote.read_bytes(where)
        except FileNotFoundError:
            raise formats.DamagedError(f"{where} is missing; {remote.OVERWRITE}") from None
        ranges.FETCHED.add(index_reads=1, index_bytes=len(raw))
        if integrity.digest_bytes(raw) != shard.shard.index_crc32c:
            raise formats.DamagedError(f"{where} fails its check against meta.json; {remote.OVERWRITE}")
        try:
            index = RecordIndex.parse(raw, record_count=shard.shard.records, size=shard.shard.bytes, where=where)
        except ValueError as error:
            raise formats.DamagedError(f"{error}; {remote.OVERWRITE}") from None
        _INDEXES[shard.key] = index
    return index


@dataclasses.dataclass
class _Open:
    reader: Any
    ranged: ranges.RangedShard | None = None


class ShardReaders:
    """Readers of ArrayRecord `files` (in order), opened on first read; with `shards`, those files are
    the committed shards of `directory` that meta.json lists, checked before a record is handed out."""

    def __init__(
        self, files: Sequence[str], *, directory: str | None = None, shards: Sequence[Shard] | None = None
    ) -> None:
        self.files, self.directory = tuple(files), directory
        self.shards = None if shards is None else tuple(shards)
        self._open: dict[int, _Open] = {}

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_open": {}}  # readers reopen, and shards are checked again, where unpickled

    def verified(self, file: int) -> bool:
        """Whether file's records were checked against checksums their writer recorded."""
        return self.shards is not None and (self._ranged(file) is not None or integrity.enabled())

    def _ranged(self, file: int) -> ranges.RangedShard | None:
        if self.shards is None and record_footer.wanted(self.files[file]):
            return record_footer.ranged(self.files[file])  # a raw file: its footer is its index
        if self.shards is None or self.directory is None or not remote.is_remote(self.directory):
            return None
        shard = self.shards[file]
        return ranges.RangedShard(self.files[file], shard) if is_indexed(shard) else None

    def by_range(self, file: int) -> bool:
        """Whether file is read by range, a batch's chunks at a time, rather than opened whole."""
        return self._ranged(file) is not None

    def reader(self, file: int) -> Any:
        """file's ArrayRecordReader, opened (and checked) on the first call: shared with this object's
        reads, so not to be closed. One read by range reads a sparse mirror, whose unfetched chunks fail
        their hashes: read its records through `read`."""
        if file not in self._open:
            self._fetch({file: np.zeros(0, dtype=np.int64)})
        return self._reader(file).reader

    def count(self, file: int) -> int:
        """The records file holds by its own footer."""
        return int(self.reader(file).num_records())

    def read(self, file_of: np.ndarray, local: np.ndarray) -> list[bytes]:
        """The records `local[i]` of files `file_of[i]`, in that order."""
        out: list[bytes] = [b""] * len(local)
        groups = {f: np.flatnonzero(file_of == f) for f in np.unique(file_of).tolist()}
        self._fetch({f: local[rows] for f, rows in groups.items()})
        for file, rows in groups.items():
            for row, record in zip(rows.tolist(), self._read(file, local[rows]), strict=True):
                out[row] = record
        return out

    def read_range(self, file: int, lo: int, hi: int) -> list[bytes]:
        """Records lo..hi of one file, in order, in one read: `read` without the grouping and ordering."""
        wanted = np.arange(lo, hi, dtype=np.int64)
        if hi > lo:
            self._fetch({file: wanted})
        return self._read(file, wanted, ordered=True) if hi > lo else []

    def _fetch(self, wanted: dict[int, np.ndarray], *, fresh: bool = False) -> None:
        """Brings into the block cache, in one read, the open ranges of the ranged shards among `wanted`
        not yet open here and the chunks of their wanted records (`fresh`: fetched again, cached or not)."""
        ranged = {f: s for f in wanted if (s := self._ranged(f)) is not None}
        if not ranged:
            return
        unknown = [s for s in ranged.values() if s.key not in _INDEXES and s.generation is None]
        list(ranges._pool().map(record_index, unknown))
        requests = []
        for file, shard in ranged.items():
            index = record_index(shard)
            if file not in self._open:
                requests += [(shard, lo, hi) for lo, hi in index.opens]
            requests += [(shard, lo, hi) for lo, hi in index.ranges(np.unique(wanted[file]))]
        ranges.read(requests, fresh=fresh)

    def _reader(self, file: int) -> _Open:
        held = self._open.get(file)
        if held is None:
            ranged = self._ranged(file)
            path, hold = self.files[file], shard_cache.Hold()
            if ranged is not None:
                path = _sized_mirror(ranged)
            elif self.shards is not None:  # fetched (gs://) or hashed (local) and checked, once per host
                path = formats.verify_shard(self.directory or "", self.shards[file], checksum=True, holder=hold)
            elif remote.is_remote(path):  # a raw file whose footer is not read here (record_footer)
                path = shard_cache.fetch(path, holder=hold)
            # meta.json's count placed every record of the split: the footer must agree before one is read.
            recorded = None if self.shards is None else self.shards[file].records
            reader = open_array_record(path, where=self.files[file], record_count=recorded)
            if ranged is None and remote.is_remote(self.files[file]):
                # A whole cached copy stays on disk while its reader lives; the cache may ask for it back.
                shard_cache.pin(path, reader, shard_cache.closer(self, "_let_go", file))
            held = self._open[file] = _Open(reader, ranged)
        return held

    def _let_go(self, file: int) -> None:
        """Drops this process's reader of a whole cached file (closed once no read is using it)."""
        self._open.pop(file, None)

    def _read(self, file: int, local: np.ndarray, *, ordered: bool = False) -> list[bytes]:
        """Records `local` of one file, in that order, in one read: a range when they are contiguous
        (`ordered`: they are lo..hi, read as they are)."""
        order = None if ordered else np.argsort(local, kind="stable")
        wanted = local if order is None else local[order]
        try:
            got = _read_sorted(self._reader(file).reader, wanted, ordered=ordered)
        except Exception as error:
            # Dropped, not closed: another thread may be reading through it still; the last reference closes it.
            self._open.pop(file, None)
            if self._ranged(file) is None:
                if isinstance(error, (formats.DamagedError, FileNotFoundError)):
                    raise  # opening it found the damage or the gap, and says which file and what to do
                raise formats.DamagedError(
                    f"{self.files[file]}: records cannot be read ({error}); the shard is corrupt"
                ) from None
            # Read from the cache: a page may have been punched out since the fetch, or (a raw file, whose
            # blocks have no checksum here) a body damaged on the way kept. Fetch them again and reopen.
            self._fetch({file: wanted}, fresh=True)
            try:
                got = _read_sorted(self._reader(file).reader, wanted, ordered=ordered)
            except Exception as again:
                why = (
                    "the file has no checksums beside it and its own hashes refused two fetches, so it was written so"
                    if self.shards is None
                    else "their blocks passed their crc32c, so either the shard was written so or DEW_CACHE_BYTES "
                    f"({remote.cache_budget()}) is too small for one batch's records of a shard"
                )
                raise formats.DamagedError(
                    f"{self.files[file]}: records {wanted.tolist()[:4]} cannot be read from the block cache even "
                    f"after a refetch ({again}); {why}"
                ) from None
        if order is None:
            return got
        out: list[bytes] = [b""] * len(local)
        for position, record in zip(order.tolist(), got, strict=True):
            out[position] = record
        return out


def _read_sorted(reader: Any, wanted: np.ndarray, *, ordered: bool = False) -> list[bytes]:
    if ordered or (int(wanted[-1]) - int(wanted[0]) + 1 == len(wanted) and len(np.unique(wanted)) == len(wanted)):
        return reader.read(int(wanted[0]), int(wanted[-1]) + 1)
    return reader.read(wanted.tolist())


def _sized_mirror(shard: ranges.RangedShard) -> str:
    """The shard's mirror in the block cache, at its full size (holes take no disk), for a reader that
    finds the postscript by the file's size."""
    path = shard.mirror()
    os.makedirs(os.path.dirname(path), exist_ok=True)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT, 0o644)
    try:
        if os.fstat(fd).st_size < shard.shard.bytes:
            os.ftruncate(fd, shard.shard.bytes)
    finally:
        os.close(fd)
    return path

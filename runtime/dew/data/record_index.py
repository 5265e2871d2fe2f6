"""Where each record of an ArrayRecord shard lies in the file: the `<shard>.index` sidecar.

An ArrayRecord file is a Riegeli/records file: 64 KiB blocks, each opened by a 24-byte block header,
and a sequence of chunks laid over them, each a 40-byte chunk header (data_size at bytes 8..16,
chunk_type at byte 24, num_records at bytes 25..32) followed by its data, the bytes continuing across
the block headers in their way. dew's writers use `group_size:1`, so every record is a chunk of its
own; after the records come ArrayRecord's footer chunk (each chunk's offset) and its postscript chunk
(where the footer is), with padding chunks between. An ArrayRecordReader reads the postscript and the
footer when it opens and, for a record, only that record's chunk.

Walking those headers as a writer streams the finished file gives, for the reader on gs://, the byte
ranges it needs: the open ranges (footer, postscript), then record i's chunk in [b_i, b_{i+1}).
Version 1 of the sidecar is little-endian uint64s: the number k of open ranges, k (lo, hi) pairs,
then the records + 1 boundaries b_0..b_n. meta.json records its version and crc32c per shard
(formats.Shard.index_version, index_crc32c). A file that is not such a shard (another group size, not
Riegeli) gets no index, and its readers fetch it whole.
"""

from __future__ import annotations

import dataclasses

import numpy as np

INDEX_SUFFIX = ".index"
INDEX_VERSION = 1
_BLOCK = 1 << 16
_BLOCK_HEADER = 24
_USABLE = _BLOCK - _BLOCK_HEADER
_CHUNK_HEADER = 40
# Every Riegeli/records file opens with this block header and signature chunk (an empty chunk of type 's').
SIGNATURE = bytes.fromhex(
    "83af70d10d884a3f00000000000000004000000000000000"
    "91bac23c9287e1a90000000000000000e19f13c0e9b1c37273000000000000000000000000000000"
)
_RECORD_CHUNKS = (b"r", b"t")  # simple and transposed chunks hold records
_PADDING = b"p"


def index_name(shard: str) -> str:
    """The file beside shard `shard` holding its record index: `train-00000-of-00004.array_record.index`."""
    return shard + INDEX_SUFFIX


def _chunk_end(begin: int, data_size: int, num_records: int) -> int:
    """The position after a chunk that begins at `begin` (Riegeli's ChunkEnd: its header and data with
    the block headers they cross, and at least one position per record, at a possible chunk boundary)."""
    length = _CHUNK_HEADER + data_size
    overhead = (length + (begin + _USABLE - 1) % _BLOCK) // _USABLE
    by_size = begin + length + overhead * _BLOCK_HEADER
    by_records = begin + num_records
    by_records += max(0, (-by_records) % _BLOCK - (_USABLE - 1))
    return max(by_size, by_records)


@dataclasses.dataclass(frozen=True)
class _Chunk:
    begin: int
    end: int
    kind: bytes
    records: int


class Walker:
    """Feeds on a file's bytes in order (as a digest does) and tells, at the end, its record index."""

    def __init__(self) -> None:
        self._buffer = bytearray()
        self._at = 0  # the file position of _buffer[0]
        self._next = 0  # where the next chunk begins
        self._size = 0
        self._chunks: list[_Chunk] = []
        self._riegeli: bool | None = None

    def update(self, data: bytes) -> None:
        if self._riegeli is False:
            return
        self._buffer += data
        self._size += len(data)
        if self._riegeli is None:
            if self._size < len(SIGNATURE):
                return
            self._riegeli = bytes(self._buffer[: len(SIGNATURE)]) == SIGNATURE
            if not self._riegeli:
                self._buffer.clear()
                return
        while (header := self._header(self._next)) is not None:
            data_size = int.from_bytes(header[8:16], "little")
            records = int.from_bytes(header[25:32], "little")
            end = _chunk_end(self._next, data_size, records)
            self._chunks.append(_Chunk(self._next, end, header[24:25], records))
            self._next = end
        drop = min(self._next, self._at + len(self._buffer)) - self._at
        del self._buffer[:drop]
        self._at += drop

    def _header(self, pos: int) -> bytes | None:
        """The 40 bytes of the chunk header at `pos` (skipping a block header), if buffered."""
        out = b""
        while len(out) < _CHUNK_HEADER:
            if pos % _BLOCK < _BLOCK_HEADER:
                pos += _BLOCK_HEADER - pos % _BLOCK
            take = min(_CHUNK_HEADER - len(out), _BLOCK - pos % _BLOCK)
            if pos + take > self._at + len(self._buffer):
                return None
            out += bytes(self._buffer[pos - self._at : pos - self._at + take])
            pos += take
        return out

    def index(self) -> bytes:
        """The version 1 record index of the file fed in, or b"" when it is not a Riegeli file of one
        record a chunk ending in an ArrayRecord footer and postscript."""
        if not self._riegeli or self._next != self._size:
            return b""
        chunks = [c for c in self._chunks[1:] if c.kind != _PADDING]
        if len(chunks) < 2:
            return b""
        *records, footer, postscript = chunks
        if any(c.kind not in _RECORD_CHUNKS or c.records != 1 for c in records):
            return b""
        bounds = [c.begin for c in records] + [records[-1].end if records else footer.begin]
        opens = [footer.begin, footer.end, postscript.begin, postscript.end]
        return np.asarray([2, *opens, *bounds], dtype="<u8").tobytes()


def index_of(data: bytes) -> bytes:
    """The record index of a whole file held in memory (Walker.index)."""
    walker = Walker()
    walker.update(data)
    return walker.index()


@dataclasses.dataclass(frozen=True)
class RecordIndex:
    """A parsed sidecar: the ranges an ArrayRecordReader reads on open, and each record's chunk range."""

    opens: tuple[tuple[int, int], ...]
    bounds: np.ndarray

    @classmethod
    def parse(cls, raw: bytes, *, record_count: int, size: int, where: str) -> RecordIndex:
        """The index in `raw`, checked to describe `record_count` records of a file of `size` bytes."""
        values = np.frombuffer(raw, dtype="<u8").astype(np.int64) if len(raw) % 8 == 0 else np.zeros(0, np.int64)
        opens = int(values[0]) if len(values) else -1
        if opens < 0 or len(values) != 1 + 2 * opens + record_count + 1:
            raise ValueError(f"{where} holds {len(raw)} bytes, not an index of {record_count} records")
        pairs = values[1 : 1 + 2 * opens].reshape(opens, 2)
        bounds = values[1 + 2 * opens :]
        if np.any(np.diff(bounds) <= 0) or bounds[0] < 0 or bounds[-1] > size or np.any(pairs > size):
            raise ValueError(f"{where}: its record ranges are not increasing within the shard's {size} bytes")
        return cls(tuple((int(lo), int(hi)) for lo, hi in pairs), bounds)

    def ranges(self, records: np.ndarray) -> list[tuple[int, int]]:
        """The byte range of each of `records` (indices within the shard)."""
        records = np.asarray(records, dtype=np.int64)
        return list(zip(self.bounds[records].tolist(), self.bounds[records + 1].tolist(), strict=True))

"""A raw ArrayRecord file on gs:// (no meta.json, no sidecars) read by record: its own footer is its index.

An ArrayRecord file ends in a 64 KiB block holding its postscript chunk (three copies of a
RiegeliPostscript: the footer's offset and ArrayRecord's magic, uncompressed), and before it the
footer chunk: a RiegeliFooterMetadata (version, chunk and record counts) and one ArrayRecordFooter a
chunk (its offset, decoded size and record count), compressed as the writer's records are. Once per
process a reader stats the object (its size and generation) and reads, by two range requests, the
postscript's first block and the footer: one index read. Every chunk then spans [offset_k,
offset_{k+1}) (the last ends where the footer begins), and record r lies in chunk r // group size, so
a batch fetches its records' chunks only, through the block cache (dew.data.ranges), plus the footer
and postscript chunks the ArrayRecordReader reads when it opens. No checksum of these files exists
beyond their own: the reader checks every chunk's Riegeli hashes, so damage or a byte read from an
evicted page is refused, never handed out (dew.data.record_shards retries once, then names it).
The footer is parsed here without its own hashes (HighwayHash, which nothing installed offers
Python): the reader checks them as it opens the file, before any record is read, and a footer too
damaged to parse is a DamagedError naming the file, so damage there is never wrong records.

A footer compressed with brotli or snappy (zstd and none are read here) cannot be parsed without
their libraries: such a file is fetched whole (dew.data.shard_cache), as DEW_GCS_RANGES=0 fetches all.
"""

from __future__ import annotations

import os
import threading

import numpy as np

from dew.data import formats, http_ranges, ranges, remote, retries
from dew.data.record_index import _BLOCK, _BLOCK_HEADER, _chunk_end

# Mirror blocks of raw files: records of a few to hundreds of kB cost at most two partial blocks.
BLOCK_BYTES = 4096
_MAGIC = 0x71930E704FDAE05E
_NONE, _ZSTD = 0, ord("z")
_RAW: dict[str, ranges.RangedShard] = {}
_INDEXES: dict[str, RawIndex] = {}
_WHOLE: set[str] = set()  # raw files whose footer this module cannot parse
_LOCK = threading.Lock()


class Unreadable(ValueError):
    """A footer this module cannot parse (another compression); the file is read whole instead."""


class RawIndex:
    """Where a raw file's records lie: the ranges its reader reads on open, and each record's chunk."""

    def __init__(self, opens: list[tuple[int, int]], offsets: np.ndarray, ends: np.ndarray, group: int) -> None:
        self.opens, self.offsets, self.ends, self.group = tuple(opens), offsets, ends, max(1, group)
        self.records = 0

    def ranges(self, records: np.ndarray) -> list[tuple[int, int]]:
        chunks = np.asarray(records, dtype=np.int64) // self.group
        return list(zip(self.offsets[chunks].tolist(), self.ends[chunks].tolist(), strict=True))


def wanted(uri: str) -> bool:
    on = os.environ.get("DEW_GCS_RANGES", "1").strip().lower() not in ("0", "false", "no", "off")
    return on and remote.is_remote(uri)


def shard(uri: str) -> ranges.RangedShard:
    """The raw file `uri` as a shard read by range: stat'ed once per process, keyed by its generation."""
    with _LOCK:
        found = _RAW.get(uri)
    if found is None:
        stat = retries.retrying(uri, lambda: remote._stat(uri))
        # Its mirror in the block cache is named as a shard (the key, from uri and generation, tells it
        # apart). It has no block checksums: blocks_crc32c only fills the entry, and a RangedShard with a
        # generation never reads one (the reader checks the file's own hashes instead).
        name = formats.shard_name("raw", 0, 1, "array_record")
        entry = formats.Shard(name, 0, 0, stat.size, "", block_bytes=BLOCK_BYTES, blocks_crc32c="0" * 8)
        found = ranges.RangedShard(uri, entry, generation=stat.generation)
        with _LOCK:
            _RAW[uri] = found
    return found


def ranged(uri: str) -> ranges.RangedShard | None:
    """The raw file `uri` read by range, its footer read; None when its footer cannot be read here
    (Unreadable), and the file is fetched whole."""
    raw = shard(uri)
    if raw.key in _WHOLE:
        return None
    try:
        index(raw)
    except Unreadable:
        _WHOLE.add(raw.key)
        return None
    return raw


def index(raw: ranges.RangedShard) -> RawIndex:
    """The record index in `raw`'s footer, read once per process (one index read: two range requests)."""
    with _LOCK:
        found = _INDEXES.get(raw.key)
    if found is not None:
        return found
    try:
        found = _parse(raw)
    except (formats.DamagedError, Unreadable):
        raise
    except (ValueError, TypeError, IndexError, OverflowError) as error:  # a field of the wrong type or size
        raise formats.DamagedError(f"{raw.uri}: its footer cannot be parsed ({error}); the file is damaged") from None
    with _LOCK:
        _INDEXES[raw.key] = found
    return found


def _parse(raw: ranges.RangedShard) -> RawIndex:
    size, where = raw.shard.bytes, raw.uri
    if size < _BLOCK:
        raise formats.DamagedError(f"{where} holds {size} bytes: an ArrayRecord file is at least 64 KiB")
    tail = size - _BLOCK
    head = _get(raw, tail, min(size, tail + BLOCK_BYTES))
    postscript, ps_end = _chunk(head, tail, where)
    fields = _fields(postscript[0], where)
    footer_at = int(fields.get(1, -1))
    if fields.get(2) != _MAGIC or not 0 <= footer_at < tail:
        raise formats.DamagedError(f"{where}: its postscript is not an ArrayRecord one; the file is not ArrayRecord")
    body = _get(raw, footer_at, tail)
    ranges.FETCHED.add(index_reads=1, index_bytes=len(head) + len(body))
    records, footer_end = _chunk(body, footer_at, where)
    meta = _fields(records[0], where).get(1)
    counts = _fields(meta, where) if isinstance(meta, bytes) else {}
    chunks = [_fields(r, where) for r in records[1:]]
    if counts.get(1) != 1 or counts.get(2) != len(chunks):
        raise formats.DamagedError(f"{where}: its footer is not a version 1 ArrayRecord footer of its chunks")
    offsets = np.asarray([int(c.get(1, 0)) for c in chunks], dtype=np.int64)
    ends = np.append(offsets[1:], footer_at) if len(offsets) else offsets
    if np.any(ends <= offsets):
        raise formats.DamagedError(f"{where}: its footer's chunk offsets are not increasing")
    group = int(chunks[0].get(3, 1)) if chunks else 1
    found = RawIndex([(footer_at, footer_end), (tail, ps_end)], offsets, ends, group)
    found.records = int(counts.get(3, 0))
    return found


def _get(raw: ranges.RangedShard, lo: int, hi: int) -> bytes:
    """Bytes [lo, hi) of the file at its generation, by the range client (dew.data.http_ranges), whose
    framing (the Content-Range names the bytes asked) and budget its chunk reads have too."""
    target = http_ranges.target(raw.uri, raw.generation)
    return retries.retrying(raw.uri, lambda: bytes(remote.get_range(raw.uri, target, lo, hi)))


def _chunk(data: bytes, begin: int, where: str) -> tuple[list[bytes], int]:
    """The records of the simple chunk beginning at file position `begin` (data holds the file from
    there on, block headers and all), and where the chunk ends."""
    flat = bytearray()
    at = 0
    while at < len(data):  # drop the block header at each 64 KiB boundary
        pos = begin + at
        if pos % _BLOCK == 0:
            at += _BLOCK_HEADER
            continue
        take = min(len(data) - at, _BLOCK - pos % _BLOCK)
        flat += data[at : at + take]
        at += take
    if begin % _BLOCK and begin % _BLOCK < _BLOCK_HEADER:
        raise formats.DamagedError(f"{where}: a chunk begins inside a block header at {begin}")
    if len(flat) < 40:
        raise formats.DamagedError(f"{where}: the chunk at {begin} is cut short")
    data_size = int.from_bytes(flat[8:16], "little")
    kind, count = flat[24:25], int.from_bytes(flat[25:32], "little")
    payload = bytes(flat[40 : 40 + data_size])
    if kind != b"r" or len(payload) != data_size or not payload:
        raise formats.DamagedError(f"{where}: the chunk at {begin} is not a whole simple chunk")
    compression = payload[0]
    sizes_size, at = _varint(payload, 1, where)
    sizes = _decompress(payload[at : at + sizes_size], compression, where)
    values = _decompress(payload[at + sizes_size :], compression, where)
    out, pos, read = [], 0, 0
    for _ in range(count):
        length, pos = _varint(sizes, pos, where)
        out.append(values[read : read + length])
        read += length
    if read != len(values):
        raise formats.DamagedError(f"{where}: the chunk at {begin} holds {len(values)} bytes, its sizes {read}")
    return out, _chunk_end(begin, data_size, count)


def _decompress(data: bytes, compression: int, where: str) -> bytes:
    if compression == _NONE:
        return data
    if compression != _ZSTD:
        raise Unreadable(f"{where}: its footer is compressed with {chr(compression)!r}, not zstd or none")
    try:
        import zstandard
    except ImportError:
        raise Unreadable(f"{where}: its footer is zstd-compressed and zstandard is not installed (dew[gcs])") from None
    size, at = _varint(data, 0, where)
    try:
        return zstandard.ZstdDecompressor().decompress(data[at:], max_output_size=size)
    except zstandard.ZstdError as error:
        raise formats.DamagedError(f"{where}: its footer does not decompress ({error}); the file is damaged") from None


def _varint(data: bytes, at: int, where: str) -> tuple[int, int]:
    value = shift = 0
    while True:
        if at >= len(data) or shift > 63:
            raise formats.DamagedError(f"{where}: a varint in its footer runs past its data; the file is damaged")
        byte = data[at]
        value |= (byte & 0x7F) << shift
        at, shift = at + 1, shift + 7
        if byte < 0x80:
            return value, at


def _fields(message: bytes, where: str) -> dict[int, int | bytes]:
    """The varint and length-delimited fields of a protobuf message (the last of each number)."""
    out: dict[int, int | bytes] = {}
    at = 0
    while at < len(message):
        key, at = _varint(message, at, where)
        number, wire = key >> 3, key & 7
        if wire == 0:
            out[number], at = _varint(message, at, where)
        elif wire == 2:
            length, at = _varint(message, at, where)
            out[number], at = message[at : at + length], at + length
        else:
            raise formats.DamagedError(f"{where}: its footer holds a protobuf field of wire type {wire}")
    return out

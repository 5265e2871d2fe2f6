"""The record index walked from an ArrayRecord file's bytes names every range the real reader needs."""

from __future__ import annotations

import os
import random

import numpy as np
import pytest
from array_record.python.array_record_module import ArrayRecordReader, ArrayRecordWriter

from dew.data.committed import open_array_record
from dew.data.formats import DamagedError
from dew.data.record_index import RecordIndex, Walker, index_of

BLOCK = 4096


def _write(path: str, records: list[bytes], options: str = "group_size:1") -> bytes:
    writer = ArrayRecordWriter(path, options)
    for record in records:
        writer.write(record)
    writer.close()
    with open(path, "rb") as f:
        return f.read()


def _records(seed: int, count: int) -> list[bytes]:
    # Sizes about a Riegeli block (64 KiB less its 24-byte header) put chunk ends, block headers and
    # chunk beginnings at every relative position, and tiny records several chunks in one block.
    rng = random.Random(seed)
    sizes = [0, 1, 33, 4000, 65_400, 65_470, 65_488, 65_512, 65_536, 131_000]
    return [rng.randbytes(rng.choice(sizes)) for _ in range(count)]


def _sparse(path: str, data: bytes, ranges: list[tuple[int, int]]) -> str:
    """A copy of `data` holding only the 4 KiB blocks `ranges` lie in, holes elsewhere."""
    if os.path.exists(path):
        os.remove(path)
    fd = os.open(path, os.O_WRONLY | os.O_CREAT)
    try:
        os.ftruncate(fd, len(data))
        for lo, hi in ranges:
            lo, hi = lo // BLOCK * BLOCK, min(len(data), -(-hi // BLOCK) * BLOCK)
            os.pwrite(fd, data[lo:hi], lo)
    finally:
        os.close(fd)
    return path


@pytest.mark.parametrize("seed", [0, 1, 2])
def test_each_records_range_and_the_open_ranges_are_all_the_reader_needs(tmp_path, seed) -> None:
    records = _records(seed, 40)
    data = _write(str(tmp_path / "a.array_record"), records)
    index = RecordIndex.parse(index_of(data), record_count=len(records), size=len(data), where="a")
    assert len(index.opens) == 2 and index.bounds[0] == 64  # after the file signature
    sparse = str(tmp_path / "sparse.array_record")
    for record in range(len(records)):
        (lo, hi), *_ = index.ranges(np.array([record]))
        reader = ArrayRecordReader(_sparse(sparse, data, [*index.opens, (lo, hi)]), "readahead_buffer_size:0")
        assert reader.num_records() == len(records)
        assert reader.read([record]) == [records[record]]
        reader.close()
    # Several records at once, in one read, from a file holding only theirs.
    chosen = np.array(sorted(random.Random(seed).sample(range(len(records)), 7)))
    reader = ArrayRecordReader(_sparse(sparse, data, [*index.opens, *index.ranges(chosen)]), "readahead_buffer_size:0")
    assert reader.read(chosen.tolist()) == [records[i] for i in chosen.tolist()]


def test_a_record_whose_blocks_are_holes_fails_the_readers_hashes_and_is_never_handed_out(tmp_path) -> None:
    records = [random.Random(i).randbytes(70_000) for i in range(8)]  # incompressible: a chunk each apart
    data = _write(str(tmp_path / "a.array_record"), records)
    index = RecordIndex.parse(index_of(data), record_count=len(records), size=len(data), where="a")
    held = index.ranges(np.array([2, 5]))
    reader = ArrayRecordReader(_sparse(str(tmp_path / "s"), data, [*index.opens, *held]), "readahead_buffer_size:0")
    assert reader.read([2, 5]) == [records[2], records[5]]
    for missing in (0, 3, 7):
        with pytest.raises(Exception, match="hash mismatch"):
            reader.read([missing])
    with pytest.raises(Exception, match="hash mismatch"):
        reader.read(1, 4)
    # Without the open ranges the reader cannot open: it says so by ok() (which open_array_record checks),
    # counts no record, and refuses a read.
    blind = ArrayRecordReader(_sparse(str(tmp_path / "t"), data, held), "readahead_buffer_size:0")
    assert not blind.ok() and blind.num_records() == 0
    with pytest.raises(Exception, match="hash mismatch"):
        blind.read([2])
    with pytest.raises(DamagedError, match=r"not a readable ArrayRecord file.*hash mismatch"):
        open_array_record(str(tmp_path / "t"), where="gs://b/t")


def test_the_walk_fed_in_pieces_is_the_walk_of_the_whole(tmp_path) -> None:
    data = _write(str(tmp_path / "a.array_record"), _records(3, 25))
    walker = Walker()
    for at in range(0, len(data), 777):  # pieces that split chunk and block headers
        walker.update(data[at : at + 777])
    assert walker.index() == index_of(data) != b""


def test_files_that_are_not_one_record_a_chunk_get_no_index(tmp_path) -> None:
    grouped = _write(str(tmp_path / "g.array_record"), _records(4, 10), "group_size:4")
    assert index_of(grouped) == b""
    assert index_of(b"\0" * 200_000) == b""  # a .bin shard
    empty = _write(str(tmp_path / "e.array_record"), [])
    index = RecordIndex.parse(index_of(empty), record_count=0, size=len(empty), where="e")
    assert len(index.bounds) == 1


def test_an_index_that_does_not_describe_the_shard_is_refused(tmp_path) -> None:
    records = _records(5, 6)
    data = _write(str(tmp_path / "a.array_record"), records)
    raw = index_of(data)
    with pytest.raises(ValueError, match="not an index of 7 records"):
        RecordIndex.parse(raw, record_count=7, size=len(data), where="a.index")
    with pytest.raises(ValueError, match="not increasing within"):
        RecordIndex.parse(raw, record_count=6, size=1000, where="a.index")
    with pytest.raises(ValueError, match="not an index"):
        RecordIndex.parse(raw[:-3], record_count=6, size=len(data), where="a.index")

"""Raw ArrayRecord shard sets on gs:// (no meta.json, no sidecars) read by record: each file's own footer,
read once by range, is its index, so a batch fetches its records' chunks, not whole shards."""

from __future__ import annotations

import os

import numpy as np
import pytest
from array_record.python.array_record_module import ArrayRecordWriter

from dew.data import ranges, record_footer
from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.formats import DamagedError
from dew.data.images import image_records
from dew.data.images.corpora import ShardSet
from tests.conftest import BUCKET
from tests.runtime.image_support import records
from tests.runtime.test_ranges import _upload_directory

pytestmark = pytest.mark.gcs


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _raw_set(tmp_path, name: str, options: list[str], each: int = 20) -> tuple[str, str, list[bytes]]:
    """A raw set `<name>/arrayrecord2/set/NNNNN.array_record`, one file per writer option string, copied
    to gs://: (local root, gs:// root, every packed record in order)."""
    rng = np.random.default_rng(len(options))
    rows = records(len(options) * each, pad=[rng.bytes(int(rng.integers(5000, 15000))) for _ in options * each])
    packed = [pack_dict_of_byte_arrays(r) for r in rows]
    directory = tmp_path / name / "arrayrecord2" / "set"
    os.makedirs(directory)
    for index, option in enumerate(options):
        writer = ArrayRecordWriter(str(directory / f"{index:05d}.array_record"), option)
        for record in packed[index * each : (index + 1) * each]:
            writer.write(record)
        writer.close()
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(str(directory), f"{uri}/arrayrecord2/set")
    return str(tmp_path / name), uri, packed


def _open(root: str, shards: int) -> image_records.ImageRecords:
    return ShardSet("arrayrecord2/set", shards).records(root)  # as a named corpus opens its sets


def _fetched() -> tuple[int, int]:
    return ranges.FETCHED.bytes, ranges.FETCHED.index_reads


def test_a_raw_set_reads_by_range_the_batches_of_its_local_copy(gcs_emulator, cache, tmp_path) -> None:
    # zstd (ArrayRecord's default) and uncompressed footers, one record a chunk and four.
    options = ["group_size:1", "group_size:1,uncompressed", "group_size:4", "group_size:1,zstd:9"]
    local, uri, packed = _raw_set(tmp_path, "raw-ranged", options)
    before = _fetched()
    near, far = _open(local, len(options)), _open(uri, len(options))
    assert len(far) == len(near) == len(packed) and far.fields == near.fields
    assert _fetched()[1] - before[1] == len(options), "one footer read per file, to count its records"
    sizes = sum(os.path.getsize(f) for f in near.files)
    rng = np.random.default_rng(0)
    batch = rng.choice(len(packed), 12, replace=False)
    start = _fetched()
    got, want = far.read_batch(batch), near.read_batch(batch)
    fetched, index_reads = (a - b for a, b in zip(_fetched(), start, strict=True))
    assert got["image"] == want["image"] and got["pad"] == want["pad"] and got["caption"] == want["caption"]
    assert index_reads == 0, "each footer was read once and kept"
    touched = {int(i) // 20 for i in batch}
    group = {0: 1, 1: 1, 2: 4, 3: 1}
    # A record costs its chunk (four records for the group_size:4 file), rounded out to 4 KiB blocks, and
    # each touched file its footer and postscript chunks (a block or two each).
    chunk_bytes = sum(
        len(b"".join(packed[(i // group[i // 20]) * group[i // 20] :][: group[i // 20]])) for i in batch.tolist()
    )
    assert fetched <= 2 * chunk_bytes + len(touched) * 4 * record_footer.BLOCK_BYTES
    assert fetched < sizes / 2, "whole shards were not fetched"
    for start_at in range(0, len(packed), 16):
        indices = np.arange(start_at, min(len(packed), start_at + 16))
        assert far.read_batch(indices)["pad"] == near.read_batch(indices)["pad"]


def test_ranges_off_reads_a_raw_set_whole_with_the_same_batches(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RANGES", "0")
    local, uri, _ = _raw_set(tmp_path, "raw-whole", ["group_size:1", "group_size:1"])
    near, far = _open(local, 2), _open(uri, 2)
    before = _fetched()
    batch = np.array([3, 25, 7])
    assert far.read_batch(batch)["pad"] == near.read_batch(batch)["pad"]
    assert _fetched() == before, "nothing was read by range"


def test_a_lying_206_on_a_raw_file_is_fetched_again_not_kept_in_the_cache(
    gcs_faults, cache, tmp_path, monkeypatch
) -> None:
    from tests.gcs_faults import Fault

    monkeypatch.setenv("DEW_GCS_REQUESTS", "1")  # one request at a time, so the lie lands on one chunk's range
    local, uri, _ = _raw_set(tmp_path, "raw-lying", ["group_size:1,uncompressed"], each=30)
    near, far = _open(local, 1), _open(uri, 1)
    assert far.read_batch(np.array([0, 1]))["pad"] == near.read_batch(np.array([0, 1]))["pad"]
    # No checksum of its own beside it: the reader's Riegeli hashes refuse the bytes, which must then be
    # fetched again rather than read back from the host's block cache they were stored in.
    gcs_faults.inject(Fault("corrupt", path=r"00000\.array_record\?alt=media&generation=", ranged=True))
    batch = np.array([17, 5, 23])
    assert far.read_batch(batch)["pad"] == near.read_batch(batch)["pad"]
    assert not gcs_faults.pending(), "the lie was met"
    assert _open(uri, 1).read_batch(batch)["pad"] == near.read_batch(batch)["pad"], "and not kept"


def test_a_footer_answered_with_other_bytes_is_asked_again(gcs_faults, cache, tmp_path) -> None:
    """A 206 of the footer's length whose Content-Range names other bytes (a proxy serving a neighbouring
    range) is not parsed as the footer: the read asks again and gets the file's own records."""
    from tests.gcs_faults import Fault

    local, uri, _ = _raw_set(tmp_path, "raw-shifted", ["group_size:1,uncompressed"])
    gcs_faults.inject(Fault("shifted", path=r"00000\.array_record\?alt=media&generation=", ranged=True, pieces=4096))
    far, near = _open(uri, 1), _open(local, 1)
    assert not gcs_faults.pending(), "the shifted answer was met"
    batch = np.array([0, 7, 19])
    assert len(far) == len(near) and far.read_batch(batch)["pad"] == near.read_batch(batch)["pad"]


def _footer_places(path: str) -> dict[str, int]:
    """File positions in a raw file's footer and postscript chunks to damage, by what lies there."""
    with open(path, "rb") as f:
        data = f.read()
    tail = len(data) - record_footer._BLOCK
    postscript_header = tail + record_footer._BLOCK_HEADER
    fields = record_footer._fields(record_footer._chunk(data[tail:], tail, path)[0][0], path)
    footer_at = int(fields[1])
    header = footer_at + (record_footer._BLOCK_HEADER if footer_at % record_footer._BLOCK == 0 else 0)
    data_size = int.from_bytes(data[header + 8 : header + 16], "little")
    assert (header + 40 + data_size) // record_footer._BLOCK == header // record_footer._BLOCK, "one block"
    return {
        "footer header hash": header,
        "footer data size": header + 8,
        "footer data hash": header + 16,
        "footer data, start": header + 40 + 1,
        "footer data, middle": header + 40 + data_size // 2,
        "footer data, end": header + 40 + data_size - 1,
        "postscript header hash": postscript_header,
        "postscript data": postscript_header + 40 + 4,
    }


@pytest.mark.parametrize("option", ["group_size:1,uncompressed", "group_size:2"])  # zstd, ArrayRecord's default
@pytest.mark.parametrize(
    "place",
    [
        "footer header hash",
        "footer data size",
        "footer data hash",
        "footer data, start",
        "footer data, middle",
        "footer data, end",
        "postscript header hash",
        "postscript data",
    ],
)
def test_a_damaged_footer_is_a_damaged_error_naming_the_file(gcs_emulator, cache, tmp_path, option, place) -> None:
    """dew parses a raw file's footer without its Riegeli hashes (HighwayHash, which nothing installed
    exposes to Python); the ArrayRecordReader checks them as it opens the file. Either way a damaged
    footer or postscript is a DamagedError naming the file, never wrong records or another exception."""
    name = f"raw-damaged-{option.replace(',', '-').replace(':', '')}-{place.replace(' ', '-').replace(',', '')}"
    local, uri, packed = _raw_set(tmp_path, name, [option])
    path = os.path.join(local, "arrayrecord2", "set", "00000.array_record")
    at = _footer_places(path)[place]
    with open(path, "r+b") as f:
        f.seek(at)
        byte = f.read(1)[0]
        f.seek(at)
        f.write(bytes([byte ^ 0x5A]))
    _upload_directory(os.path.dirname(path), f"{uri}/arrayrecord2/set")
    with pytest.raises(DamagedError, match=f"{uri}/arrayrecord2/set/00000.array_record"):
        _open(uri, 1).read_batch(np.arange(len(packed)))
        pytest.fail("a file with a damaged footer was read")

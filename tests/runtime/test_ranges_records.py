"""gs:// ArrayRecord shards read by record: a batch fetches its records' chunks, the cache stays bounded."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dew.data import ArrayRecordImages, Loading, blockcache, formats, ranges, record_shards, remote
from dew.data.committed_records import VERIFIED
from dew.data.images import image_records
from dew.data.record_index import RecordIndex, index_name
from tests.conftest import BUCKET
from tests.gcs_faults import Fault
from tests.runtime.image_support import records, write_committed
from tests.runtime.test_ranges import _disk_held, _upload_directory
from tests.support import assert_batches_equal, gcs_filesystem, read_global

pytestmark = pytest.mark.gcs
BLOCK = 4096


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _corpus(tmp_path, name: str, *, shards: int = 6, each: int = 30, pad: int = 12_000, checksums: bool = True):
    """A committed images directory of photographs (with `pad` random bytes a record, so a record spans
    several blocks), written locally and copied to gs://: (local directory, gs:// URI)."""
    rng = np.random.default_rng(len(name))
    extra = [rng.bytes(int(rng.integers(pad // 2, pad + 1))) for _ in range(shards * each)]
    rows = records(shards * each, pad=extra)
    local = str(tmp_path / name)
    write_committed(local, {"train": [rows[i * each : (i + 1) * each] for i in range(shards)]}, checksums=checksums)
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(local, uri)
    return local, uri


def _same(far: dict, near: dict) -> None:
    assert far["image"] == near["image"] and far["caption"] == near["caption"] and far["pad"] == near["pad"]


def _blocks(local: str, indices: np.ndarray, opened: set[int]) -> tuple[int, int]:
    """(bytes of the distinct blocks a read of `indices` needs, of which the records' own chunk bytes),
    opening the shards not in `opened`, from the local copy's record indexes."""
    entries = formats.read_meta(local).shards("train")
    ends = np.cumsum([s.records for s in entries])
    need: dict[int, set[int]] = {}
    chunk_bytes = 0
    for record in np.unique(indices).tolist():
        shard = int(np.searchsorted(ends, record, side="right"))
        entry = entries[shard]
        with open(index_name(os.path.join(local, entry.name)), "rb") as f:
            index = RecordIndex.parse(f.read(), record_count=entry.records, size=entry.bytes, where=entry.name)
        spans = index.ranges(np.array([record - (int(ends[shard - 1]) if shard else 0)]))
        chunk_bytes += sum(hi - lo for lo, hi in spans)
        if shard not in opened:
            spans += list(index.opens)
            opened.add(shard)
        for lo, hi in spans:
            need.setdefault(shard, set()).update(range(lo // BLOCK, (hi - 1) // BLOCK + 1))
    size = sum(min(BLOCK, entries[s].bytes - b * BLOCK) for s, blocks in need.items() for b in blocks)
    return size, chunk_bytes


def _records(directory: str) -> image_records.ImageRecords:
    """The train split's records of a committed images directory, local or gs://."""
    return image_records.committed(formats.read_meta(directory, kind="images"), directory, "train")


def _whole_shards(cache: str) -> list[str]:
    found = [(d, n) for d, _, names in os.walk(cache) for n in names if n.endswith(".array_record")]
    return [n for d, n in found if remote.blocks_dir() not in d]


def test_a_first_batch_fetches_its_records_chunks_and_each_shards_open_ranges(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "records-first")
    near = _records(local)
    far = _records(uri)
    assert all(record_shards.is_indexed(s) for s in far.shards)
    corpus = sum(s.bytes for s in far.shards)
    batch = np.random.default_rng(0).choice(len(near), 32, replace=False)
    before = (ranges.FETCHED.bytes, ranges.FETCHED.index_reads)
    got = far.read_batch(batch)
    _same(got, near.read_batch(batch))
    assert all(got[VERIFIED])
    fetched, index_reads = ranges.FETCHED.bytes - before[0], ranges.FETCHED.index_reads - before[1]
    expected, chunks = _blocks(local, batch, set())
    touched = len(np.unique(np.searchsorted(far.ends, batch, side="right")))
    assert fetched == expected, "every block the batch's records and the shards' open ranges lie in, once"
    opens = expected - chunks  # the open ranges and the rounding out to blocks
    assert fetched <= 2 * chunks + touched * 3 * BLOCK, (fetched, chunks, opens)
    assert index_reads == 2 * touched  # block checksums and record index, once a shard
    assert fetched < corpus / 4 and not _whole_shards(cache)
    # A second batch opens no shard again: only its records' new blocks are fetched.
    second = np.random.default_rng(1).choice(len(near), 16, replace=False)
    before = ranges.FETCHED.bytes
    _same(far.read_batch(second), near.read_batch(second))
    assert ranges.FETCHED.bytes - before <= _blocks(local, second, set(range(len(far.shards))))[0]


def test_disk_held_stays_within_the_budget_over_an_epoch_of_a_corpus_five_times_the_cache(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    local, uri = _corpus(tmp_path, "records-epoch", shards=5, each=24)
    near = _records(local)
    corpus = sum(s.bytes for s in near.shards)
    budget = corpus // 5
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    far = _records(uri)
    order = np.random.default_rng(2).permutation(len(near))
    most, before = 0, ranges.FETCHED.bytes
    for batch in np.array_split(order, len(order) // 8):
        _same(far.read_batch(batch), near.read_batch(batch))
        held = _disk_held()
        assert held <= budget, f"the cache holds {held} bytes on disk, over its {budget}-byte budget"
        assert blockcache.used() <= budget
        most = max(most, held)
    assert most > budget // 2, "the cache was used"
    fetched = ranges.FETCHED.bytes - before
    assert corpus * 0.5 < fetched < corpus * 1.5, "an epoch reads about the corpus once, records and open ranges"


def test_a_page_punched_out_between_fetch_and_read_costs_a_refetch_never_a_wrong_byte(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    local, uri = _corpus(tmp_path, "records-race", shards=2)
    near = _records(local)
    far = _records(uri)
    real, punched = ranges.read, []

    def read_then_evict(requests, **how):
        out = real(requests, **how)
        if not punched:  # as another worker's eviction would, the ledger left saying the pages are held
            for shard in {s for s, _, _ in requests}:
                pages = os.path.getsize(shard.mirror()) // (BLOCK * blockcache.page_blocks(BLOCK)) + 1
                for page in range(pages):
                    blockcache._punch(shard.mirror(), page)
                punched.append(shard.uri)
        return out

    monkeypatch.setattr(ranges, "read", read_then_evict)
    before = ranges.FETCHED.bytes
    _same(far.read_batch(np.arange(4)), near.read_batch(np.arange(4)))  # the footer punched before the open
    assert punched and ranges.FETCHED.bytes > before + 2 * _blocks(local, np.arange(4), set())[0] - BLOCK
    punched.clear()
    batch = np.array([5, 40, 9, 33])
    before = ranges.FETCHED.bytes
    _same(far.read_batch(batch), near.read_batch(batch))
    assert punched and ranges.FETCHED.bytes > before, "the punched blocks failed their crc32c and were fetched again"


def test_a_damaged_record_is_refused_naming_shard_and_block(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    local, uri = _corpus(tmp_path, "records-damaged", shards=1)
    name = formats.shard_name("train", 0, 1, "array_record")
    entry = formats.read_meta(local).shards("train")[0]
    with open(index_name(os.path.join(local, name)), "rb") as f:
        index = RecordIndex.parse(f.read(), record_count=entry.records, size=entry.bytes, where=name)
    with open(os.path.join(local, name), "rb") as f:
        data = bytearray(f.read())
    lo, hi = index.ranges(np.array([7]))[0]
    data[(lo + hi) // 2] ^= 0xFF  # same size, one byte inside record 7's chunk flipped
    with gcs_filesystem().open(f"{uri}/{name}", "wb") as f:
        f.write(bytes(data))
    far = _records(uri)
    near = _records(local)
    _same(far.read_batch(np.array([0, 20])), near.read_batch(np.array([0, 20])))
    with pytest.raises(formats.DamagedError, match=rf"{name}: block {(lo + hi) // 2 // BLOCK} .* fails its crc32c"):
        far.read_batch(np.array([7]))


def test_range_requests_of_records_survive_throttling_resets_and_short_bodies(
    gcs_faults, cache, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DEW_GCS_REQUESTS", "1")  # one request at a time, so each fault lands on a range
    local, uri = _corpus(tmp_path, "records-faults", shards=2)
    shard = r"records-faults%2Ftrain-00000-of-00002\.array_record\?alt=media$"
    gcs_faults.inject(
        Fault("429", path=shard, ranged=True, retry_after="0"),
        Fault("503", path=shard, ranged=True),
        Fault("reset", path=shard, ranged=True),
        Fault("truncate", path=shard, ranged=True, fraction=0.3),
        Fault("slow", path=shard, ranged=True, pieces=3, pause=0.02),
    )
    near = _records(local)
    far = _records(uri)
    for batch in (np.arange(0, 30, 3), np.arange(1, 30, 4), np.arange(2, 30, 5)):
        _same(far.read_batch(batch), near.read_batch(batch))
    assert not gcs_faults.pending(), "every scheduled fault met a range request"
    sums = r"records-faults%2Ftrain-0000\d-of-00002\.array_record\.blocks\?alt=media$"  # fetched by range too
    ranged = gcs_faults.count(shard) + gcs_faults.count(sums)
    assert ranged == len(gcs_faults.ranged) > 5, "the shard and its checksums were only ever asked for by range"


@pytest.mark.parametrize("why", ["DEW_GCS_RANGES=0", "no record index"])
def test_whole_shards_without_an_index_or_with_ranges_off(gcs_emulator, cache, tmp_path, monkeypatch, why) -> None:
    if why == "DEW_GCS_RANGES=0":
        monkeypatch.setenv("DEW_GCS_RANGES", "0")
    local, uri = _corpus(tmp_path, f"records-whole-{len(why)}", shards=2, checksums=why != "no record index")
    near = _records(local)
    far = _records(uri)
    assert not any(record_shards.is_indexed(s) for s in far.shards)
    _same(far.read_batch(np.array([3, 1, 4])), near.read_batch(np.array([3, 1, 4])))
    assert _whole_shards(cache) == [formats.shard_name("train", 0, 2, "array_record")]


def test_a_gs_image_stream_is_the_local_ones_and_resumes_across_the_two(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "records-stream", shards=3, each=16, pad=3000)
    serial = Loading(workers=0, read_buffer=8)
    here = ArrayRecordImages(local, image_size=16, val_batches=0, seed=5, loading=serial).load(batch=4)
    there = ArrayRecordImages(uri, image_size=16, val_batches=0, seed=5, loading=serial).load(batch=4)
    full, _ = read_global(here.train, 1, 8)
    remote_full, _ = read_global(there.train, 2, 8)
    assert_batches_equal(full, remote_full)
    for first, then in ((there, here), (here, there)):
        head, state = read_global(first.train, 2, 3)
        tail, _ = read_global(then.train, 1, 5, state)
        assert_batches_equal(full, head + tail)
    # A worker process reads by record too, into the same host cache.
    worker = Loading(workers=1, read_buffer=8)
    spawned = ArrayRecordImages(uri, image_size=16, val_batches=0, seed=5, loading=worker).load(batch=4)
    assert_batches_equal(full[:4], read_global(spawned.train, 1, 4)[0])
    assert not _whole_shards(cache)


def test_gs_clip_shards_are_read_by_record_too(gcs_emulator, cache, tmp_path) -> None:
    import dataclasses

    from dew.data.committed import TEMP_DIR
    from dew.data.video.clip_shards import ClipShards
    from dew.preprocess import files
    from tests.runtime.test_clip_shards import FAST, write_clips

    local = str(write_clips(tmp_path / "clips", shards=3, per_shard=9))
    meta = formats.read_meta(local)
    entries = []
    for shard in meta.shards("train"):  # as the decode-clips job now records them
        summed = files.checksums_of(os.path.join(local, shard.name))
        summed.write_blocks(os.path.join(local, shard.name), local)
        entries.append(summed.shard(shard.name, record_count=shard.records, units=shard.units))
    formats.write_meta(local, dataclasses.replace(meta, splits={"train": tuple(entries)}))
    os.rmdir(os.path.join(local, TEMP_DIR))
    uri = f"gs://{BUCKET}/records-clips"
    _upload_directory(local, uri)
    near, far = ClipShards(path=local, loading=FAST).records(), ClipShards(path=uri, loading=FAST).records()
    assert all(record_shards.is_indexed(s) for s in far.shards)
    batch = np.array([20, 3, 11, 4])
    before = ranges.FETCHED.bytes
    got, want = far.read_batch(batch), near.read_batch(batch)
    assert got.keys() == want.keys()
    for key in want:
        np.testing.assert_array_equal(np.asarray(got[key]), np.asarray(want[key]))
    assert ranges.FETCHED.bytes - before == _blocks(local, batch, set())[0] and not _whole_shards(cache)


def test_an_array_record_token_corpus_on_gs_reads_its_records_by_range(gcs_emulator, cache, tmp_path) -> None:
    from dew.data.pieces import PIECES, PieceIndex
    from dew.data.tokens.opening import open_tokens
    from tests.runtime.token_support import documents, write_corpus

    docs = documents(600, seed=5, longest=3000)
    local = write_corpus(str(tmp_path / "ar"), {"train": docs}, kind="array_record", shards=3, block_bytes=BLOCK)
    # The piece index the tokenize job writes beside an ArrayRecord split, so nothing scans the shards.
    lengths = [np.array([len(docs[i]) for i in group]) for group in np.array_split(np.arange(len(docs)), 3)]
    PieceIndex.of_lengths(lengths, field="").save(
        formats.derived_path(local, "train", PIECES), formats.read_meta(local).fingerprint()
    )
    uri = f"gs://{BUCKET}/records-tokens"
    _upload_directory(local, uri)
    before = ranges.FETCHED.bytes
    near, far = open_tokens(local), open_tokens(uri)
    assert all(far.readers.by_range(f) for f in range(3)) and len(far) == len(near)
    for lo, hi in ((0, 50), (len(near) // 2, len(near) // 2 + 4000), (len(near) - 90, len(near))):
        np.testing.assert_array_equal(far[lo:hi], near[lo:hi])
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    assert 0 < ranges.FETCHED.bytes - before < corpus / 4 and not _whole_shards(cache)

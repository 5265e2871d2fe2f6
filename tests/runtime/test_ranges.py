"""gs:// token shards read by range: the bytes of a local copy, blocks checked, a cache bounded on disk."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dew.data import block_sums, blockcache, formats, mirrors, ranges, remote
from dew.data.tokens.token_bytes import TokenBytes
from tests.conftest import BUCKET
from tests.gcs_faults import Fault
from tests.runtime.token_support import write_corpus
from tests.support import gcs_filesystem

pytestmark = pytest.mark.gcs
BLOCK = 512


def _upload_directory(local: str, uri: str) -> None:
    fs = gcs_filesystem()
    for name in sorted(os.listdir(local)):
        with open(os.path.join(local, name), "rb") as source, fs.open(f"{uri}/{name}", "wb") as target:
            target.write(source.read())
    fs.invalidate_cache()


def _corpus(
    tmp_path,
    name: str,
    *,
    shards: int = 5,
    docs: int = 40,
    block_bytes: int = BLOCK,
    blocks_version: int = block_sums.BLOCKS_VERSION,
) -> tuple[str, str]:
    """A committed corpus written locally and copied to gs://: (local directory, gs:// URI)."""
    rng = np.random.default_rng(len(name))
    # Each closed by the eos (0), as the tokenize job writes them: a .bin shard's eos ids are its documents.
    documents = [np.append(rng.integers(1, 60000, rng.integers(50, 400)), 0) for _ in range(docs)]
    local = write_corpus(
        str(tmp_path / name),
        {"train": documents},
        shards=shards,
        block_bytes=block_bytes,
        blocks_version=blocks_version,
    )
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(local, uri)
    return local, uri


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _fetched() -> tuple[int, int, int]:
    return ranges.FETCHED.requests, ranges.FETCHED.bytes, ranges.FETCHED.index_reads


def test_windows_read_by_range_are_the_local_copys(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "ranges-same", docs=300)
    near, far = TokenBytes(local), TokenBytes(uri)
    assert far._ranged is not None and len(far) == len(near)
    rng = np.random.default_rng(0)
    starts = rng.integers(0, len(near) - 300, 24)
    starts[:4] = [int(e) - 100 for e in near.ends[:-1]]  # rows that cross from one shard into the next
    before = _fetched()
    np.testing.assert_array_equal(far.spans(starts, 300), near.spans(starts, 300))
    requests, fetched, index_reads = (a - b for a, b in zip(_fetched(), before, strict=True))
    spans = _byte_ranges(near, starts, 300)
    blocks = {(s, b) for s, lo, hi in spans for b in range(lo // BLOCK, (hi - 1) // BLOCK + 1)}
    assert fetched == sum(min(BLOCK, near.ends[s] * 2 - (near._base(s) * 2 + b * BLOCK)) for s, b in blocks)
    assert fetched < 0.5 * sum(s.bytes for s in formats.read_meta(local).shards("train"))
    assert index_reads == len({s for s, _ in blocks}) and requests <= len(blocks)
    np.testing.assert_array_equal(far[100:5000], near[100:5000])
    whole = [n for d, _, names in os.walk(cache) for n in names if n.endswith(".bin") and remote.blocks_dir() not in d]
    assert not whole, "no shard was fetched whole"
    # A second read of the same windows is served by the host's block cache, every block checked again.
    before = _fetched()
    np.testing.assert_array_equal(TokenBytes(uri).spans(starts, 300), near.spans(starts, 300))
    assert _fetched()[:2] == before[:2]


def _byte_ranges(tokens: TokenBytes, starts: np.ndarray, length: int) -> list[tuple[int, int, int]]:
    out = []
    for start in starts.tolist():
        at, stop = start, start + length
        while at < stop:
            shard = int(np.searchsorted(tokens.ends, at, side="right"))
            end = min(stop, int(tokens.ends[shard]))
            out.append((shard, (at - tokens._base(shard)) * 2, (end - tokens._base(shard)) * 2))
            at = end
    return out


def test_the_same_bytes_rewritten_with_other_blocks_read_in_the_same_process(gcs_emulator, cache, tmp_path) -> None:
    """A corpus written again at its path with the same shard bytes but another block size: a process that
    held the first layout's checksums reads the second by its own, never taking one for the other
    (which failed every block's crc32c as damage)."""
    local, uri = _corpus(tmp_path, "ranges-relaid", docs=200, block_bytes=4096)
    near = TokenBytes(local)
    starts = np.random.default_rng(1).integers(0, len(near) - 300, 16)
    np.testing.assert_array_equal(TokenBytes(uri).spans(starts, 300), near.spans(starts, 300))
    again = write_corpus(
        str(tmp_path / "relaid"),
        {"train": [near[int(a) : int(b)] for a, b in _documents(near)]},
        shards=5,
        block_bytes=256,
    )
    assert [s.sha256 for s in formats.read_meta(again).shards("train")] == [
        s.sha256 for s in formats.read_meta(local).shards("train")
    ], "the same shard bytes"
    _upload_directory(again, uri)
    np.testing.assert_array_equal(TokenBytes(uri).spans(starts, 300), near.spans(starts, 300))


def _documents(tokens: TokenBytes) -> list[tuple[int, int]]:
    """(start, end) of each document of `tokens`, its closing eos (0) included."""
    ends = np.flatnonzero(tokens[0 : len(tokens)] == 0) + 1
    return list(zip([0, *ends[:-1].tolist()], ends.tolist(), strict=True))


def test_concurrent_reads_fetch_each_shards_block_file_once(gcs_emulator, cache, tmp_path) -> None:
    from concurrent.futures import ThreadPoolExecutor

    local, uri = _corpus(tmp_path, "ranges-once", shards=3, docs=200)
    near, far = TokenBytes(local), TokenBytes(uri)
    starts = np.arange(0, len(near) - 300, 97)
    before = ranges.FETCHED.index_reads
    with ThreadPoolExecutor(8) as pool:  # as the stream's read-ahead threads do
        rows = list(pool.map(lambda at: far.spans(starts[at::8], 300), range(8)))
    for at, got in enumerate(rows):
        np.testing.assert_array_equal(got, near.spans(starts[at::8], 300))
    assert ranges.FETCHED.index_reads - before == 3, "one read of each shard's .blocks, whichever thread came first"


def test_range_requests_survive_throttling_resets_and_short_bodies(gcs_faults, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_REQUESTS", "1")  # one request at a time, so each fault lands on a range
    local, uri = _corpus(tmp_path, "ranges-faults", shards=2)
    tokens = TokenBytes(uri)
    shard = r"ranges-faults%2Ftrain-00000-of-00002\.bin\?alt=media$"
    gcs_faults.inject(
        Fault("429", path=shard, ranged=True, retry_after="0"),
        Fault("503", path=shard, ranged=True),
        Fault("reset", path=shard, ranged=True),
        Fault("truncate", path=shard, ranged=True, fraction=0.3),
        Fault("slow", path=shard, ranged=True, pieces=3, pause=0.02),
    )
    starts = np.arange(0, int(tokens.ends[0]) - 200, 700)
    np.testing.assert_array_equal(tokens.spans(starts, 200), TokenBytes(local).spans(starts, 200))
    assert not gcs_faults.pending(), "every scheduled fault met a range request"
    sums = r"ranges-faults%2Ftrain-0000\d-of-00002\.bin\.blocks\?alt=media$"  # fetched by range too
    ranged = gcs_faults.count(shard) + gcs_faults.count(sums)
    assert ranged == len(gcs_faults.ranged) > 5, "the shard and its checksums were only ever asked for by range"


def test_a_damaged_block_is_refused_naming_shard_and_block(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    local, uri = _corpus(tmp_path, "ranges-damaged", shards=1)
    name = formats.shard_name("train", 0, 1, "bin")
    with open(os.path.join(local, name), "rb") as f:
        data = bytearray(f.read())
    data[3 * BLOCK + 7] ^= 0xFF  # same size, one byte of block 3 flipped
    fs = gcs_filesystem()
    with fs.open(f"{uri}/{name}", "wb") as f:
        f.write(bytes(data))
    tokens = TokenBytes(uri)
    np.testing.assert_array_equal(tokens[0:BLOCK], TokenBytes(local)[0:BLOCK])  # blocks 0-1 are intact
    with pytest.raises(formats.DamagedError, match=rf"{name}: block 3 .* fails its crc32c in 3 fetches"):
        tokens[3 * BLOCK // 2 : 3 * BLOCK // 2 + 10]


@pytest.mark.parametrize("layout", [block_sums.BLOCKS_VERSION, 1])
@pytest.mark.parametrize("damaged", [124, 127, 128, 131])
def test_a_damaged_cached_block_inside_a_run_is_fetched_again_alone(
    gcs_emulator, cache, tmp_path, layout, damaged
) -> None:
    # Blocks 124-131 are one run of the cache's blocks, whose checksums are looked up at once; with the
    # two-level layout it crosses from checksum group 0 into group 1 (128 blocks of 512 bytes a group).
    local, uri = _corpus(tmp_path, f"ranges-cached-{layout}-{damaged}", shards=1, docs=300, blocks_version=layout)
    near, far = TokenBytes(local), TokenBytes(uri)
    assert far._ranged is not None and len(near) > 132 * BLOCK // 2
    assert block_sums.group_blocks(BLOCK) == 128
    ids = slice(124 * BLOCK // 2, 132 * BLOCK // 2)
    np.testing.assert_array_equal(far[ids], near[ids])
    before = _fetched()
    np.testing.assert_array_equal(far[ids], near[ids])
    assert _fetched()[:2] == before[:2], "all eight served by the cache"
    (shard,) = far._ranged
    fd = os.open(shard.mirror(), os.O_RDWR)
    try:  # same size, one byte of one cached block flipped, the ledger still saying it is held
        byte = os.pread(fd, 1, damaged * BLOCK + 100)
        os.pwrite(fd, bytes([byte[0] ^ 0x01]), damaged * BLOCK + 100)
    finally:
        os.close(fd)
    before = _fetched()
    np.testing.assert_array_equal(far[ids], near[ids])
    requests, fetched, _ = (a - b for a, b in zip(_fetched(), before, strict=True))
    assert (requests, fetched) == (1, BLOCK), "the damaged block, and only it, was fetched again"
    before = _fetched()
    np.testing.assert_array_equal(far[ids], near[ids])
    assert _fetched()[:2] == before[:2], "and the cache holds it again, checked"


def deleted_open_under(root: str) -> int:
    """Allocated bytes of deleted files under `root` this process still holds, by a descriptor or a memory
    map. Only `root`: other tests' deleted temporary files are not the cache's disk."""
    root = os.path.realpath(root)
    held: dict[tuple[int, int], int] = {}
    links = [f"/proc/self/fd/{fd}" for fd in os.listdir("/proc/self/fd")]
    with open("/proc/self/maps") as maps:
        links += [f"/proc/self/map_files/{line.split()[0]}" for line in maps if line.rstrip().endswith("(deleted)")]
    for link in links:
        try:
            target = os.readlink(link)
            if target.endswith(" (deleted)") and target.startswith(root + os.sep):
                stat = os.stat(link)
                held[stat.st_dev, stat.st_ino] = stat.st_blocks * 512
        except OSError:
            continue
    return sum(held.values())


def _disk_held() -> int:
    """Allocated bytes of the block cache's files, plus those of its deleted files this process holds open."""
    return blockcache.allocated() + deleted_open_under(remote.cache_dir())


@pytest.mark.parametrize("block_bytes", [4096, 256])  # 256: what .bin writers record; blocks under a disk block
def test_disk_held_stays_within_the_budget_over_an_epoch_of_a_corpus_five_times_the_cache(
    gcs_emulator, cache, tmp_path, monkeypatch, block_bytes
) -> None:
    local, uri = _corpus(tmp_path, f"ranges-epoch-{block_bytes}", shards=6, docs=4500, block_bytes=block_bytes)
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    budget = corpus // 5
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    near, far = TokenBytes(local), TokenBytes(uri)
    length = 2048
    order = np.random.default_rng(1).permutation((len(near) - 1) // length) * length
    most, fetched = 0, ranges.FETCHED.bytes
    for batch in np.array_split(order, max(1, len(order) // 4)):
        np.testing.assert_array_equal(far.spans(batch, length + 1), near.spans(batch, length + 1))
        held = _disk_held()
        assert held <= budget, f"the cache holds {held} bytes on disk, over its {budget}-byte budget"
        assert blockcache.allocated() <= blockcache.used() <= budget, "the ledger charges what the mirrors take"
        most = max(most, held)
    assert most > budget // 2, "the cache was used"
    assert ranges.FETCHED.bytes - fetched >= corpus * 0.9  # every window was read from gs://, not elsewhere


def test_dew_gcs_ranges_0_fetches_whole_shards_as_before(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RANGES", "0")
    local, uri = _corpus(tmp_path, "ranges-off", shards=2)
    tokens = TokenBytes(uri)
    assert tokens._ranged is None
    np.testing.assert_array_equal(tokens[10:900], TokenBytes(local)[10:900])
    whole = [n for d, _, names in os.walk(cache) for n in names if n.endswith(".bin") and remote.blocks_dir() not in d]
    assert whole == [formats.shard_name("train", 0, 2, "bin")]


def _read_in_batches(args: tuple[str, list[int], int]) -> tuple[bytes, int]:
    """A worker process: the windows at `starts`, eight at a time, and the most disk the host's cache held."""
    uri, starts, length = args
    tokens, out, most = TokenBytes(uri), [], 0
    for at in range(0, len(starts), 8):
        out.append(tokens.spans(np.array(starts[at : at + 8]), length).tobytes())
        most = max(most, blockcache.allocated())
    return b"".join(out), most


def test_worker_processes_share_one_bounded_cache(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    import multiprocessing

    local, uri = _corpus(tmp_path, "ranges-shared", shards=4, docs=3000, block_bytes=4096)
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    budget = corpus // 4
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    near, length = TokenBytes(local), 1500
    rng = np.random.default_rng(2)
    jobs = [(uri, rng.integers(0, len(near) - length, 48).tolist(), length) for _ in range(3)]
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        results = pool.map(_read_in_batches, jobs, chunksize=1)
    for (_, starts, _), (data, most) in zip(jobs, results, strict=True):
        assert data == near.spans(np.array(starts), length).tobytes()
        assert most <= budget
    assert blockcache.used() <= budget and blockcache.allocated() <= blockcache.used()
    pages = blockcache._ledger().execute("SELECT SUM(bytes) FROM pages").fetchone()[0] or 0
    files = blockcache._ledger().execute("SELECT COUNT(*) FROM files").fetchone()[0]
    assert blockcache.used() == pages + files * mirrors.file_charge(), "the ledger's total is what its rows hold"


def test_a_parquet_token_corpus_reads_footers_and_row_groups_by_range(gcs_emulator, cache, tmp_path) -> None:
    from dew.data.pieces import PIECES, PieceIndex
    from dew.data.tokens.opening import open_tokens
    from tests.runtime.token_support import documents

    docs = documents(2000, seed=4, longest=300)
    local = write_corpus(str(tmp_path / "pq"), {"train": docs}, kind="parquet", shards=3, block_bytes=4096)
    # The row index the tokenize job writes beside a parquet split, so nothing scans the shards.
    lengths = [np.array([len(docs[i]) for i in group]) for group in np.array_split(np.arange(len(docs)), 3)]
    index = formats.derived_path(local, "train", PIECES)
    PieceIndex.of_lengths(lengths, field="ids").save(index, formats.read_meta(local).fingerprint())
    uri = f"gs://{BUCKET}/ranges-parquet"
    _upload_directory(local, uri)
    before = ranges.FETCHED.bytes
    near, far = open_tokens(local), open_tokens(uri)
    assert far.ranged and len(far) == len(near)
    for lo, hi in ((0, 50), (len(near) // 2, len(near) // 2 + 700), (len(near) - 90, len(near))):
        np.testing.assert_array_equal(far[lo:hi], near[lo:hi])
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    fetched = ranges.FETCHED.bytes - before
    assert 0 < fetched < corpus / 2, "footers (pyarrow reads the last 64 KiB) and the row groups read, not whole files"
    whole = [
        n for d, _, names in os.walk(cache) for n in names if n.endswith(".parquet") and remote.blocks_dir() not in d
    ]
    assert not whole, "no parquet shard was fetched whole"

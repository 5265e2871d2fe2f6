"""Block checksums of gs:// shards read by range (dew.data.block_sums): a first batch fetches the top
level and the groups its blocks lie in, damage anywhere is refused by shard, the checksums a process
holds stay under $DEW_CHECKSUM_BYTES, and a corpus of the older, flat layout reads as before."""

from __future__ import annotations

import os
import threading
import time

import numpy as np
import pytest

from dew.data import block_sums, formats, ranges
from dew.data.tokens.token_bytes import TokenBytes
from tests.conftest import BUCKET
from tests.runtime.test_ranges import _upload_directory
from tests.runtime.token_support import write_corpus
from tests.support import gcs_filesystem

pytestmark = pytest.mark.gcs
BLOCK = 256  # what .bin writers record: groups of 256 checksums (1 KiB), each covering 64 KiB of ids
IDS_PER_GROUP = block_sums.GROUP_SPAN // 2
NAME = formats.shard_name("train", 0, 1, "bin")


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _corpus(tmp_path, name: str, *, groups: int = 64, blocks_version: int = block_sums.BLOCKS_VERSION):
    """A one-shard corpus of `groups` groups of checksums, written locally and copied to gs://."""
    rng = np.random.default_rng(len(name))
    ids = np.append(rng.integers(1, 60000, groups * IDS_PER_GROUP - 1), 0)
    local = write_corpus(
        str(tmp_path / name), {"train": [ids]}, shards=1, block_bytes=BLOCK, blocks_version=blocks_version
    )
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(local, uri)
    return local, uri


def _counts() -> tuple[int, int, int, int]:
    f = ranges.FETCHED
    return f.index_reads, f.index_bytes, f.sums_reads, f.sums_bytes


def test_a_first_batch_fetches_the_top_level_and_only_its_groups(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "sums-first")
    far, near = TokenBytes(uri), TokenBytes(local)
    starts = np.array([2, 20, 40]) * IDS_PER_GROUP + 100  # a window inside each of three far-apart groups
    before = _counts()
    np.testing.assert_array_equal(far.spans(starts, 300), near.spans(starts, 300))
    index_reads, index_bytes, sums_reads, sums_bytes = (a - b for a, b in zip(_counts(), before, strict=True))
    assert (index_reads, index_bytes) == (1, 4 * 64), "the top level alone: 4 bytes a group"
    assert (sums_reads, sums_bytes) == (3, 3 * 1024), "one request for each window's group, and nothing else"
    before = _counts()
    np.testing.assert_array_equal(far.spans(starts + 1000, 300), near.spans(starts + 1000, 300))
    assert _counts() == before, "the same groups again: held, nothing fetched"


def test_the_groups_near_the_top_level_come_in_its_request(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "sums-tail", groups=8)  # group 6 lies within the gap a request spans of the top
    before = _counts()
    start = 6 * IDS_PER_GROUP + 10
    np.testing.assert_array_equal(TokenBytes(uri)[start : start + 500], TokenBytes(local)[start : start + 500])
    index_reads, index_bytes, sums_reads, _ = (a - b for a, b in zip(_counts(), before, strict=True))
    assert (index_reads, sums_reads) == (1, 0) and index_bytes == 2 * 1024 + 4 * 8, "groups 6-7 and the top level"


def test_checksums_held_stay_under_their_budget(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv(block_sums.CHECKSUM_BYTES_ENV, "3000")  # two groups and a top level, not three groups
    local, uri = _corpus(tmp_path, "sums-bounded")
    far, near = TokenBytes(uri), TokenBytes(local)
    rng = np.random.default_rng(1)
    most = 0
    for _ in range(12):
        starts = rng.integers(0, len(near) - 300, 4)
        np.testing.assert_array_equal(far.spans(starts, 300), near.spans(starts, 300))
        most = max(most, block_sums.held()[1])
    entries = block_sums.held()[0]
    assert most <= 3000 and entries <= 3, "evicted least recently used first, whatever was read"
    before = ranges.FETCHED.sums_reads
    np.testing.assert_array_equal(far[0:300], near[0:300])  # evicted long ago: fetched and checked again
    assert ranges.FETCHED.sums_reads == before + 1


@pytest.mark.parametrize("where", ["block", "group", "top"])
def test_a_flipped_byte_anywhere_is_refused_naming_the_shard(gcs_emulator, cache, tmp_path, monkeypatch, where) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    local, uri = _corpus(tmp_path, f"sums-damaged-{where}", groups=32)
    target = NAME if where == "block" else NAME + formats.BLOCKS_SUFFIX
    with open(os.path.join(local, target), "rb") as f:
        data = bytearray(f.read())
    # Block 3's data; the checksums of group 10 (blocks 2560..2815); the top level's entry of group 0.
    at = {"block": 3 * BLOCK + 7, "group": 4 * 2600 + 1, "top": 4 * 32 * 256 + 2}[where]
    data[at] ^= 0xFF
    with gcs_filesystem().open(f"{uri}/{target}", "wb") as f:
        f.write(bytes(data))
    tokens = TokenBytes(uri)
    start = {"block": 3 * BLOCK // 2, "group": 2600 * BLOCK // 2, "top": 10}[where]
    with pytest.raises(formats.DamagedError, match=rf"{NAME}(\.blocks)?: .*in 3 fetches"):
        tokens[start : start + 10]


def test_a_corpus_of_the_flat_layout_reads_as_before(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "sums-flat", groups=16, blocks_version=1)
    (entry,) = formats.read_meta(local).splits["train"]
    assert entry.blocks_version == 0 and "blocks_version" not in entry.to_json()
    assert os.path.getsize(os.path.join(local, NAME + formats.BLOCKS_SUFFIX)) == 4 * 16 * 256, "checksums alone"
    far, near = TokenBytes(uri), TokenBytes(local)
    before, held = _counts(), block_sums.held()
    starts = np.array([1, 9]) * IDS_PER_GROUP
    np.testing.assert_array_equal(far.spans(starts, 300), near.spans(starts, 300))
    index_reads, index_bytes, sums_reads, _ = (a - b for a, b in zip(_counts(), before, strict=True))
    assert (index_reads, index_bytes, sums_reads) == (1, 4 * 16 * 256, 0), "read whole, once"
    assert block_sums.held() == held, "and kept where it always was"


def test_a_blocks_file_cut_short_is_refused_naming_the_shard(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    local, uri = _corpus(tmp_path, "sums-short", groups=32)
    with open(os.path.join(local, NAME + formats.BLOCKS_SUFFIX), "rb") as f:
        flat = f.read()[: 4 * 32 * 256]  # the checksums without their top level: a flat file under version 2
    with gcs_filesystem().open(f"{uri}/{NAME}{formats.BLOCKS_SUFFIX}", "wb") as f:
        f.write(flat)
    with pytest.raises((formats.DamagedError, OSError), match=rf"{NAME}\.blocks"):
        TokenBytes(uri)[0:10]


def _two_reads_of_one_group(monkeypatch, uri: str, start: int, damage: bool = False) -> list[object]:
    """Two threads read the same window of a shard whose top level is held: the first one's request for
    the window's group is held back until the second has either asked for it too or is waiting on it."""
    entered, go, asked = threading.Event(), threading.Event(), [0]
    real = block_sums._get_range

    def held_back(where: str, lo: int, hi: int) -> bytes:
        body = real(where, lo, hi)
        asked[0] += 1
        entered.set()
        if asked[0] == 1:
            go.wait(timeout=60)
        return bytes([body[0] ^ 0xFF]) + body[1:] if damage else body

    monkeypatch.setattr(block_sums, "_get_range", held_back)
    tokens, out = TokenBytes(uri), [None, None]

    def read(i: int) -> None:
        try:
            out[i] = tokens[start : start + 300]
        except Exception as error:  # what each reader got, data or error, is the test's subject
            out[i] = error

    first = threading.Thread(target=read, args=(0,))
    first.start()
    assert entered.wait(timeout=60), "the first read asked for its group"
    second = threading.Thread(target=read, args=(1,))
    second.start()

    def waiting() -> bool:
        lru = block_sums.cache()
        with lru.lock:
            return any(flight.waiters for flight in lru.flights.values())

    # Until the second read has made its move, whichever it is: its own request, or a wait on the first's.
    while asked[0] < 2 and second.is_alive() and not waiting():
        time.sleep(0.01)
    go.set()
    first.join(timeout=120)
    second.join(timeout=120)
    return out


def test_reads_of_one_group_at_once_fetch_it_once(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    local, uri = _corpus(tmp_path, "sums-shared")
    near = TokenBytes(local)
    TokenBytes(uri)[0:10]  # the top level (and group 0) held
    start = 20 * IDS_PER_GROUP + 100
    before = _counts()
    got = _two_reads_of_one_group(monkeypatch, uri, start)
    for tokens in got:
        np.testing.assert_array_equal(tokens, near[start : start + 300])
    assert _counts()[2:] == (before[2] + 1, before[3] + 1024), "one request for the group, the other read waited"


def test_a_read_waiting_on_a_group_gets_the_fetch_s_error(gcs_emulator, cache, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    _, uri = _corpus(tmp_path, "sums-shared-bad")
    TokenBytes(uri)[0:10]
    before = _counts()
    got = _two_reads_of_one_group(monkeypatch, uri, 20 * IDS_PER_GROUP + 100, damage=True)
    for error in got:
        assert isinstance(error, formats.DamagedError) and "checksum group 20" in str(error), error
    assert _counts()[2] == before[2] + 3, "the first read's three tries, none of the waiting read's own"

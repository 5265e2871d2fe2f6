"""The whole-object gs:// cache keeps DEW_CACHE_BYTES as a bound on disk at every moment: files readers
hold open are never deleted under them (so none lingers deleted and open), and are counted."""

from __future__ import annotations

import gc
import os

import numpy as np
import pytest

from dew.data import formats, remote, shard_cache
from dew.data.images import image_records
from dew.data.tokens.token_bytes import TokenBytes
from tests.conftest import BUCKET
from tests.runtime.image_support import records, write_committed
from tests.runtime.test_ranges import _upload_directory, deleted_open_under
from tests.runtime.token_support import write_corpus
from tests.support import gcs_filesystem

pytestmark = pytest.mark.gcs


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    os.makedirs(tmp_path / "cache")
    return str(tmp_path / "cache")


def _disk_held() -> int:
    return shard_cache.held_bytes() + deleted_open_under(remote.cache_dir())


def _token_corpus(tmp_path, name: str, shards: int) -> tuple[str, str]:
    rng = np.random.default_rng(shards)
    # Each document closed by the eos (0), as the tokenize job writes them: a .bin shard's eos ids are its documents.
    documents = [np.append(rng.integers(1, 60000, int(rng.integers(2000, 4000))), 0) for _ in range(shards * 8)]
    local = write_corpus(str(tmp_path / name), {"train": documents}, shards=shards)  # no block checksums
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(local, uri)
    return local, uri


def _budget(local: str, split: str, fit: float) -> int:
    """A budget that holds `fit` of the split's largest shards as the cache counts them (whole blocks)."""
    block = os.statvfs(remote.cache_dir()).f_bsize
    largest = max(s.bytes for s in formats.read_meta(local).shards(split))
    return int(fit * (-(-largest // block) * block + block))


def test_a_token_corpus_five_times_the_cache_reads_whole_shards_within_the_budget(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    local, uri = _token_corpus(tmp_path, "whole-tokens", shards=6)
    budget = _budget(local, "train", 1.5)
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    near, far = TokenBytes(local), TokenBytes(uri)
    assert far._ranged is None
    length, most = 700, 0
    rng = np.random.default_rng(3)
    starts = np.arange(0, len(near) - length, 97)
    shard_of = np.searchsorted(near.ends, starts, side="right")
    within = shard_of == np.searchsorted(near.ends, starts + length - 1, side="right")
    for _ in range(2):
        for shard in rng.permutation(len(near.ends)).tolist():
            batch = starts[within & (shard_of == shard)][:8]
            np.testing.assert_array_equal(far.spans(batch, length), near.spans(batch, length))
            held = _disk_held()
            assert held <= budget, f"the cache holds {held} bytes on disk, over its {budget}-byte budget"
            most = max(most, held)
    assert most > budget // 2, "the cache was used"


def _upload(uri: str, data: bytes) -> None:
    fs = gcs_filesystem()
    with fs.open(uri, "wb") as f:
        f.write(data)
    fs.invalidate_cache()


class _Reader:
    """Stands for a reader with a cached file open: what it holds, the cache keeps."""


def test_a_file_held_open_is_never_deleted_and_a_cache_full_of_them_refuses_by_name(
    gcs_emulator, cache, monkeypatch
) -> None:
    block = os.statvfs(cache).f_bsize
    monkeypatch.setenv("DEW_CACHE_BYTES", str(4 * block))  # one file of two blocks and its checksum
    uris = [f"gs://{BUCKET}/held/{i}.bin" for i in range(2)]
    for i, uri in enumerate(uris):
        _upload(uri, bytes([i]) * 2 * block)
    reader = _Reader()
    first = shard_cache.fetch(uris[0], size=2 * block, holder=reader)
    with open(first, "rb") as handle, pytest.raises(OSError, match=r"1 files readers hold open \(1 in this process\)"):
        shard_cache.fetch(uris[1], size=2 * block)
    assert os.path.exists(first) and _disk_held() <= 4 * block
    del reader, handle
    gc.collect()
    second = shard_cache.fetch(uris[1], size=2 * block)  # the holder went: its file may go
    assert not os.path.exists(first) and os.path.exists(second) and _disk_held() <= 4 * block


def test_committed_image_shards_fetched_whole_stay_within_the_budget(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    rng = np.random.default_rng(5)
    rows = records(5 * 12, pad=[rng.bytes(int(rng.integers(6000, 12000))) for _ in range(60)])
    local = str(tmp_path / "whole-images")
    write_committed(local, {"train": [rows[i * 12 : (i + 1) * 12] for i in range(5)]})  # no block checksums
    uri = f"gs://{BUCKET}/whole-images"
    _upload_directory(local, uri)
    budget = _budget(local, "train", 2.5)
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    near, far = (image_records.committed(formats.read_meta(d, kind="images"), d, "train") for d in (local, uri))
    order = np.random.default_rng(6).permutation(len(near))
    for batch in np.array_split(order, 10):
        got, want = far.read_batch(batch), near.read_batch(batch)
        assert got["image"] == want["image"] and got["pad"] == want["pad"]
        held = _disk_held()
        assert held <= budget, f"the cache holds {held} bytes on disk, over its {budget}-byte budget"

"""The shard cache under GCS faults: throttling, server errors, cut and corrupted bodies, many processes."""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import time
import types

import numpy as np
import pytest

from dew.data import retries, shard_cache
from tests.conftest import BUCKET
from tests.gcs_faults import Fault, FaultProxy
from tests.runtime.test_remote import _upload, _upload_directory

pytestmark = pytest.mark.gcs
MEDIA = r"alt=media"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


class _Clock:
    """Stands in for the time module inside remote: sleeps are recorded and pass at once."""

    def __init__(self) -> None:
        self.now = 0.0
        self.sleeps: list[float] = []

    def monotonic(self) -> float:
        return self.now

    def sleep(self, seconds: float) -> None:
        self.sleeps.append(seconds)
        self.now += seconds


@pytest.fixture
def clock(monkeypatch) -> _Clock:
    fake = _Clock()
    namespace = types.SimpleNamespace(monotonic=fake.monotonic, sleep=fake.sleep, time=time.time, time_ns=time.time_ns)
    monkeypatch.setattr(retries, "time", namespace)
    return fake


def _object(name: str, size: int = 300_000) -> tuple[str, bytes, str]:
    data = np.random.default_rng(len(name)).integers(0, 256, size, dtype=np.uint8).tobytes()
    uri = f"gs://{BUCKET}/faults/{name}"
    _upload(uri, data)
    return uri, data, hashlib.sha256(data).hexdigest()


def _cached_files(cache: str) -> list[str]:
    return sorted(n for _, _, names in os.walk(cache) for n in names)


def test_every_fault_is_retried_and_only_verified_bytes_are_cached(gcs_faults: FaultProxy, cache, clock) -> None:
    uri, data, sha = _object("every.bin")
    gcs_faults.inject(
        Fault("503", method="GET", path=r"/o/faults%2Fevery\.bin\?"),  # object metadata
        Fault("429", path=MEDIA, retry_after="2"),
        Fault("503", path=MEDIA),
        Fault("reset", path=MEDIA),
        Fault("truncate", path=MEDIA, fraction=0.9),
        Fault("slow", path=MEDIA),
    )
    local = shard_cache.fetch(uri, size=len(data), sha256=sha)
    assert not gcs_faults.pending()
    with open(local, "rb") as f:
        assert f.read() == data
    assert _cached_files(cache) == ["every.bin", "every.bin.crc32c", "every.bin.lock", "whole.lock"]
    assert gcs_faults.count(MEDIA) == 5  # four failed bodies, then the slow one that arrived whole
    assert 2.0 in clock.sleeps, "Retry-After was not honoured"


def test_backoff_is_exponential_with_jitter_and_bounded(gcs_faults: FaultProxy, cache, clock, monkeypatch) -> None:
    uri, data, sha = _object("bounded.bin", 1000)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    gcs_faults.inject(Fault("503", path=MEDIA, times=1000))
    with pytest.raises(OSError, match=r"bounded\.bin: still failing after \d+ attempts within 20 s"):
        shard_cache.fetch(uri, size=len(data), sha256=sha)
    assert sum(clock.sleeps) <= 20
    for tries, slept in enumerate(clock.sleeps):
        assert 0 <= slept <= min(retries.MAX_DELAY, retries.FIRST_DELAY * 2**tries)
    assert len(set(clock.sleeps)) > 1, "no jitter"
    left = [n for n in _cached_files(cache) if not n.endswith(".lock")]
    assert not left, "nothing but the lock files is left"


def test_a_retry_after_beyond_the_budget_fails_at_once(gcs_faults: FaultProxy, cache, clock, monkeypatch) -> None:
    uri, data, _ = _object("later.bin", 1000)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "5")
    gcs_faults.inject(Fault("429", path=MEDIA, retry_after="60"))
    with pytest.raises(OSError, match=r"after 1 attempts within 5 s .*HTTP 429"):
        shard_cache.fetch(uri, size=len(data))
    assert clock.sleeps == []


def test_a_cached_shard_changed_on_disk_is_fetched_again(gcs_faults: FaultProxy, cache) -> None:
    uri, data, sha = _object("changed.bin")
    local = shard_cache.fetch(uri, size=len(data), sha256=sha)
    with open(local, "r+b") as f:  # same size, one byte flipped: only the bytes can tell
        f.seek(1000)
        f.write(bytes([data[1000] ^ 0xFF]))
    with pytest.warns(UserWarning, match="changed on disk after download"):
        assert shard_cache.fetch(uri, size=len(data), sha256=sha) == local
    with open(local, "rb") as f:
        assert f.read() == data
    assert gcs_faults.count(MEDIA) == 2


def _fetch(args: tuple[str, int, str]) -> str:
    uri, size, sha = args
    return shard_cache.fetch(uri, size=size, sha256=sha)


def test_worker_processes_download_a_shard_once(gcs_faults: FaultProxy, cache) -> None:
    uri, data, sha = _object("shared.bin")
    # A slow body keeps the first download open while the other processes ask for the same shard.
    gcs_faults.inject(Fault("slow", path=MEDIA, pieces=10, pause=0.1))
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_fetch, [(uri, len(data), sha)] * 6)
    assert len(set(paths)) == 1
    assert gcs_faults.count(MEDIA) == 1


def test_token_windows_over_gs_give_the_same_batches_under_faults(gcs_faults: FaultProxy, cache, tmp_path) -> None:
    from dew.data import DataPartition, Loading, datasets
    from tests.runtime.token_support import documents, write_corpus
    from tests.support import assert_batches_equal

    local = write_corpus(str(tmp_path / "c"), {"train": documents(60, seed=3)}, kind="array_record", shards=3)
    uri = f"gs://{BUCKET}/faults/corpus"
    _upload_directory(local, uri)
    gcs_faults.inject(
        Fault("429", path=r"meta\.json.*" + MEDIA, retry_after="0"),
        Fault("503", path=r"train-.*" + MEDIA, times=2),
        Fault("reset", path=r"train-.*" + MEDIA),
        Fault("truncate", path=r"train-.*" + MEDIA),
    )
    serial = Loading(workers=0, threads=2, read_buffer=8)
    batches = {}
    for where in (uri, local):
        data = datasets.TokenWindows(path=where, seq_len=8, loading=serial).load(batch=4)
        with data.train(DataPartition()) as stream:
            batches[where] = [next(stream) for _ in range(20)]
    assert not gcs_faults.pending()
    assert_batches_equal(batches[local], batches[uri])

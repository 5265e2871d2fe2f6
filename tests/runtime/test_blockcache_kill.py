"""A host's block cache shared by processes, one of them killed (SIGKILL) in the middle of a store: the
blocks it wrote but never committed are freed by the next store of another process, so the disk held
stays within what the ledger counts and DEW_CACHE_BYTES, and no half-written page is read as good."""

from __future__ import annotations

import multiprocessing
import os
import signal

import numpy as np
import pytest

from dew.data import blockcache, formats
from dew.data.tokens.token_bytes import TokenBytes
from tests.runtime.test_ranges import _corpus, _disk_held

pytestmark = pytest.mark.gcs


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _killed_in_its_store(uri: str, starts: list[int], length: int) -> None:
    """A worker process that dies by SIGKILL once its first page of fetched blocks is on disk, before the
    ledger's transaction that counts them commits (the real write runs; the kill is the fault)."""
    real = blockcache._write

    def write_then_die(path: str, block_bytes: int, page: int, blocks: dict[int, bytes]) -> None:
        real(path, block_bytes, page, dict(list(blocks.items())[: max(1, len(blocks) // 2)]))  # half the page
        os.kill(os.getpid(), signal.SIGKILL)

    blockcache._write = write_then_die  # type: ignore[assignment]
    TokenBytes(uri).spans(np.array(starts), length)


def test_a_worker_killed_mid_store_leaves_no_uncounted_disk_and_no_page_read_as_good(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    local, uri = _corpus(tmp_path, "killed-mid-store", shards=4, docs=2000, block_bytes=4096)
    corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
    budget = corpus // 3
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    near, length = TokenBytes(local), 1200
    theirs = np.arange(0, int(near.ends[0]) - length, 5000)[:8]  # the first shard's windows
    child = multiprocessing.get_context("spawn").Process(
        target=_killed_in_its_store, args=(uri, theirs.tolist(), length)
    )
    child.start()
    child.join(120)
    assert child.exitcode == -signal.SIGKILL
    assert blockcache.allocated() > 0, "the killed worker left blocks on disk"
    # Another process of the host goes on, reading other shards' windows: its first store frees them.
    far = TokenBytes(uri)
    rng = np.random.default_rng(3)
    for _ in range(6):
        mine = rng.integers(int(near.ends[0]), len(near) - length, 8)
        np.testing.assert_array_equal(far.spans(mine, length), near.spans(mine, length))
        assert blockcache.allocated() <= blockcache.used() <= budget, "the ledger counts every block on disk"
        assert _disk_held() <= budget
    # The pages it was writing read as the local copy's bytes: fetched again, each block checked.
    np.testing.assert_array_equal(far.spans(theirs, length), near.spans(theirs, length))
    assert blockcache.allocated() <= blockcache.used() <= budget

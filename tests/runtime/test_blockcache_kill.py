"""A host's block cache shared by processes, one of them killed (SIGKILL) in the middle of a store: the
blocks it wrote but never committed are freed by the next store of another process, so the disk held
stays within what the ledger counts and DEW_CACHE_BYTES, and no half-written page is read as good."""

from __future__ import annotations

import multiprocessing
import os
import signal
import subprocess
from collections.abc import Iterator

import numpy as np
import pytest

from dew.data import blockcache, formats, remote
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


def test_a_finished_stores_journal_is_removed_without_punching_its_pages(cache, monkeypatch) -> None:
    """Between a store's commit and its removal of its journal another process may store: it must see
    that journal's number committed and leave the pages it names (counted, good) where they are; and
    the first store's own removal then finds nothing to remove, which is not an error."""
    monkeypatch.setenv("DEW_CACHE_BYTES", str(1 << 30))
    block, first, second = 4096, blockcache.mirror("k", "a.bin", 4096), blockcache.mirror("k", "b.bin", 4096)
    data = {0: b"a" * block, 1: b"b" * block}
    real_unlink = os.unlink
    left: list[str] = []

    def keep_journal(path: str) -> None:  # the first store's writer is slow to remove its journal
        if os.path.basename(path).startswith("writing-") and not left:
            left.append(path)
            with open(path) as f:
                left.append(f.read())
        real_unlink(path)

    monkeypatch.setattr(os, "unlink", keep_journal)
    blockcache.store({first: data}, {first: block}, {})
    monkeypatch.setattr(os, "unlink", real_unlink)
    journal, text = left
    with open(journal, "w") as f:  # as if the first store had not removed it yet
        f.write(text)
    held = blockcache.used()
    blockcache.store({second: data}, {second: block}, {})
    assert not os.path.exists(journal), "a committed store's journal is removed"
    assert blockcache.used() == 2 * held, "nothing the finished store wrote was dropped"
    with open(first, "rb") as f:
        assert f.read(2 * block) == data[0] + data[1], "its pages were not punched out"


def test_a_journal_of_a_store_that_never_committed_is_punched_out(cache, monkeypatch) -> None:
    monkeypatch.setenv("DEW_CACHE_BYTES", str(1 << 30))
    block, first, second = 4096, blockcache.mirror("k", "a.bin", 4096), blockcache.mirror("k", "b.bin", 4096)
    data = {0: b"a" * block}
    blockcache.store({first: data}, {first: block}, {})
    before = blockcache.used()

    def killed(path: str, block_bytes: int, page: int, blocks: dict[int, bytes]) -> None:
        real(path, block_bytes, page, blocks)
        raise KeyboardInterrupt  # the process dies after its write, before its commit

    real = blockcache._write
    monkeypatch.setattr(blockcache, "_write", killed)
    with pytest.raises(KeyboardInterrupt):
        blockcache.store({first: {1: b"b" * block}}, {first: block}, {})
    monkeypatch.setattr(blockcache, "_write", real)
    assert blockcache.used() == before, "the lost store counted nothing"
    with open(first, "rb") as f:
        assert f.read(2 * block) == data[0] + b"b" * block, "but its block is on disk"
    blockcache.store({second: data}, {second: block}, {})
    assert blockcache.allocated() <= blockcache.used()
    with open(first, "rb") as f:
        assert f.read(2 * block) == b"\0" * (2 * block), "the page it wrote into is punched out: a refetch"


def _epoch(uri: str, local: str, budget: int, lose_ledger) -> None:
    """Windows of every shard four at a time; halfway through, `lose_ledger(path)` does to the ledger
    what a cleanup or a disk error would. After every batch the cache holds no more disk than the budget
    and the ledger counts, and every window is the local copy's."""
    near, far, length = TokenBytes(local), TokenBytes(uri), 2048
    order = np.random.default_rng(1).permutation((len(near) - 1) // length) * length
    batches = np.array_split(order, len(order) // 4)
    for at, batch in enumerate(batches):
        if at == len(batches) // 2:
            lose_ledger(os.path.join(remote.blocks_dir(), "ledger.sqlite"))
        np.testing.assert_array_equal(far.spans(batch, length + 1), near.spans(batch, length + 1))
        assert _disk_held() <= budget, f"batch {at}: the cache holds {_disk_held()} bytes on disk"
        assert blockcache.allocated() <= blockcache.used() <= budget, "the ledger counts every block on disk"


def _deleted(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        os.unlink(path + suffix)


def _garbled(path: str) -> None:
    for suffix in ("", "-wal", "-shm"):
        with open(path + suffix, "r+b") as f:
            f.write(os.urandom(4096))


@pytest.mark.parametrize("lose_ledger", [_deleted, _garbled])
def test_a_ledger_lost_while_a_reader_runs_leaves_no_uncounted_disk_and_no_failed_read(
    gcs_emulator, cache, tmp_path, monkeypatch, lose_ledger
) -> None:
    """Deleted (a cleanup of the cache directory): the running reader's connection no longer counts what
    the next ledger bounds, and the mirrors' blocks were counted by none (the disk reached 1.5x the budget).
    Garbled (a disk error): every read of the host failed with sqlite's "file is not a database"."""
    local, uri = _corpus(tmp_path, f"lost-ledger-{lose_ledger.__name__}", shards=6, docs=4500, block_bytes=4096)
    budget = sum(s.bytes for s in formats.read_meta(local).shards("train")) // 5
    monkeypatch.setenv("DEW_CACHE_BYTES", str(budget))
    _epoch(uri, local, budget, lose_ledger)


@pytest.fixture
def small_disk(tmp_path) -> Iterator[str]:
    """A 256 KiB tmpfs of the test's own (mounting needs root: skipped without it), unmounted at the end."""
    where = tmp_path / "small-disk"
    where.mkdir()
    if os.geteuid() != 0 or subprocess.run(["mount", "-t", "tmpfs", "-o", "size=256k", "tmpfs", str(where)]).returncode:
        pytest.skip("mounting a small filesystem needs root")
    try:
        yield str(where)
    finally:
        subprocess.run(["umount", "-l", str(where)], check=False)


def test_a_full_disk_under_the_cache_serves_batches_uncached(gcs_emulator, small_disk, tmp_path, monkeypatch) -> None:
    """A budget larger than the filesystem's free space: each read fetched its blocks, then failed as it
    stored them ("database or disk is full", 77 batches of 82). The blocks are in memory: served, said once."""
    local, uri = _corpus(tmp_path, "full-disk", shards=4, docs=3000, block_bytes=4096)
    near, length = TokenBytes(local), 2048
    order = np.random.default_rng(1).permutation((len(near) - 1) // length) * length
    batches = np.array_split(order, len(order) // 4)
    expected = [near.spans(batch, length + 1) for batch in batches]  # the local copy's, checked elsewhere
    monkeypatch.setenv("DEW_CACHE_DIR", os.path.join(small_disk, "cache"))
    monkeypatch.setenv("DEW_CACHE_BYTES", str(10 << 20))
    far = TokenBytes(uri)
    with pytest.warns(RuntimeWarning, match=r"block cache under .*small-disk/cache/blocks is out of disk"):
        for batch, want in zip(batches, expected, strict=True):
            np.testing.assert_array_equal(far.spans(batch, length + 1), want)


def test_a_read_only_cache_is_named(gcs_emulator, small_disk, tmp_path, monkeypatch) -> None:
    os.makedirs(os.path.join(small_disk, "cache", "blocks"))
    subprocess.run(["mount", "-o", "remount,ro", small_disk], check=True)
    monkeypatch.setenv("DEW_CACHE_DIR", os.path.join(small_disk, "cache"))
    _, uri = _corpus(tmp_path, "read-only-cache", shards=2, docs=200, block_bytes=4096)
    with pytest.raises(OSError, match=r"ledger .*small-disk/cache/blocks/ledger.sqlite cannot be opened or written"):
        TokenBytes(uri)[0:1000]

"""A read the block cache serves marks its pages' last use in memory, not in the ledger; the next store
writes those marks before it evicts, so its least recently used pages are still the ones evicted."""

from __future__ import annotations

import pytest

from dew.data import block_uses, blockcache, mirrors

BLOCK = 4096


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    block_uses.take()  # marks other tests' reads left waiting, of other caches
    assert blockcache.used() == 0  # the ledger, and its directory, made
    return str(tmp_path / "cache")


def _used(path: str) -> int:
    (used,) = blockcache._ledger().execute("SELECT used FROM pages WHERE path = ? AND page = 0", (path,)).fetchone()
    return int(used)


def _store(path: str) -> None:
    blockcache.store({path: {0: bytes([len(path) % 256]) * BLOCK}}, {path: BLOCK}, {})


def test_a_served_reads_last_use_waits_in_memory_and_the_next_store_evicts_by_it(cache, monkeypatch) -> None:
    monkeypatch.setattr(block_uses, "FLUSH_SECONDS", 3600.0)
    first, second, third = (blockcache.mirror("k", name, BLOCK) for name in ("a", "bb", "ccc"))
    page = blockcache.charge(BLOCK, 0, [0])
    # Room for three files and two pages: the third file's page evicts one of the first two.
    monkeypatch.setenv("DEW_CACHE_BYTES", str(3 * mirrors.file_charge() + 2 * page))
    _store(first)
    _store(second)
    was = _used(first)
    assert _used(second) > was
    assert blockcache.store({}, {first: BLOCK}, {first: [0]}) == 0  # the first page read again, from the cache
    assert _used(first) == was, "its last use is not written yet: no write lock taken for a read the cache served"
    assert blockcache.store({third: {0: b"c" * BLOCK}}, {third: BLOCK}, {}) == page
    assert blockcache.held_pages(first, [0]) == {0: {0}}, "read last, so kept"
    assert blockcache.held_pages(second, [0]) == {0: set()}, "the least recently used page was evicted"
    assert blockcache.held_pages(third, [0]) == {0: {0}}
    assert _used(first) > was, "its mark was written with that store"


def test_waiting_marks_are_written_by_a_read_once_they_are_flush_seconds_old(cache, monkeypatch) -> None:
    path = blockcache.mirror("k", "a", BLOCK)
    _store(path)
    was = _used(path)
    monkeypatch.setattr(block_uses, "FLUSH_SECONDS", 0.0)
    blockcache.store({}, {path: BLOCK}, {path: [0]})
    assert _used(path) > was, "written at once when due"
    assert not block_uses.take(), "and no longer waiting"


def test_marks_put_back_keep_the_latest_use_of_a_page() -> None:
    block_uses.take()
    block_uses.note({"m": [1, 2]}, 10)
    taken = block_uses.take()
    block_uses.note({"m": [1]}, 20)
    block_uses.put_back(taken)  # a failed write's marks: page 1's later use stays
    assert sorted(block_uses.take()) == [(10, "m", 2), (20, "m", 1)]

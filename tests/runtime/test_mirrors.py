"""Cached blocks read back from a mirror a run at a time: the bytes of each block, a hole as zeros (so
its check fails and it is fetched again), nothing past the file's end."""

from __future__ import annotations

import ctypes
import ctypes.util
import os

import numpy as np
import pytest

from dew.data import blockcache, mirrors
from dew.data.tokens.token_bytes import TokenBytes
from tests.runtime.test_ranges import BLOCK, _corpus, _fetched


def _punch(path: str, offset: int, length: int) -> None:
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    fd = os.open(path, os.O_WRONLY)
    try:  # PUNCH_HOLE | KEEP_SIZE, as the cache's eviction does
        assert libc.fallocate(fd, 0x03, ctypes.c_int64(offset), ctypes.c_int64(length)) == 0, ctypes.get_errno()
    finally:
        os.close(fd)


def test_runs_of_adjacent_blocks_are_one_pread_each_and_cut_into_their_blocks(tmp_path, monkeypatch) -> None:
    size, fs = 256, os.statvfs(tmp_path).f_bsize
    data = np.random.default_rng(0).integers(0, 256, 64 * size, dtype=np.uint8).tobytes()
    path = str(tmp_path / "mirror")
    with open(path, "wb") as f:
        f.write(data)
    _punch(path, fs, fs)  # the blocks in the second filesystem block become a hole
    holed = set(range(fs // size, 2 * fs // size))
    reads = []
    real = os.pread

    def counted(fd: int, length: int, offset: int) -> bytes:
        reads.append((offset, length))
        return real(fd, length, offset)

    monkeypatch.setattr(os, "pread", counted)
    wanted = [0, 1, 2, 5, *range(fs // size - 1, 2 * fs // size + 1), 62, 63, 64, 65, 70]
    got = mirrors.read_blocks(path, reversed(wanted), size)
    assert len(reads) == 5, "one pread a run: 0-2, 5, the run across the hole, 62-65 and 70"
    assert sorted(got) == sorted(wanted)
    for block in wanted:
        if block >= 64:
            assert got.get(block, b"") == b"", "past the end: nothing"
        elif block in holed:
            assert got[block] == bytes(size), "a hole reads as zeros"
        else:
            assert got[block] == data[block * size : (block + 1) * size]
    assert mirrors.read_blocks(str(tmp_path / "absent"), [1, 2], size) == {}
    assert mirrors.read_blocks(path, [], size) == {}


@pytest.mark.gcs
def test_a_block_punched_out_of_a_cached_run_is_fetched_again(gcs_emulator, tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    local, uri = _corpus(tmp_path, "mirrors-punched", shards=1, docs=300)
    near, far = TokenBytes(local), TokenBytes(uri)
    assert far._ranged is not None
    ids = slice(10 * BLOCK // 2, 40 * BLOCK // 2)  # blocks 10-39 of 512 bytes: one run of the cache
    np.testing.assert_array_equal(far[ids], near[ids])
    (shard,) = far._ranged
    per_page = blockcache.page_blocks(BLOCK)
    assert all(blockcache.held_pages(shard.mirror(), [b // per_page for b in range(10, 40)]).values())
    fs = os.statvfs(shard.mirror()).f_bsize
    _punch(shard.mirror(), 20 * BLOCK // fs * fs, fs)  # behind the ledger's back, as an eviction racing a read
    gone = set(range(20 * BLOCK // fs * fs // BLOCK, (20 * BLOCK // fs + 1) * fs // BLOCK)) & set(range(10, 40))
    before = _fetched()
    np.testing.assert_array_equal(far[ids], near[ids])
    requests, fetched, _ = (a - b for a, b in zip(_fetched(), before, strict=True))
    assert (requests, fetched) == (1, len(gone) * BLOCK), "the punched blocks, and only they, were fetched again"
    before = _fetched()
    np.testing.assert_array_equal(far[ids], near[ids])
    assert _fetched()[:2] == before[:2], "and the cache holds them again"

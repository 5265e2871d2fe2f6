"""Where the block cache keeps a shard's mirror file, the disk its pages take, and reading its blocks back.

A mirror (dew.data.blockcache) holds each block at its offset in the shard, so a run of adjacent blocks
lies contiguous in it and is read by one pread, then cut into blocks. What is read is unchecked here:
a hole (a block never written, or punched out by an eviction, even while this read has the file open)
reads as zeros and a block past the file's end reads short, and the caller's crc32c check refuses both.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import os
from collections.abc import Iterable

from dew.data import remote

# A page is the ledger's unit (one row, evicted whole) whatever the block size, so a cache of small
# blocks has as many rows as one of 4 KiB blocks; a block larger than a page is a page of one block.
PAGE_BYTES = 64 << 10
# Bytes an extent record may take on disk, with room for the index blocks above the leaves (ext4's are
# 12 bytes, 340 to a 4 KiB leaf); a page spanning n filesystem blocks holds at most (n + 1) // 2 extents.
_EXTENT = 16
_FS_BLOCKS: dict[str, int] = {}  # the filesystem block size under each blocks directory
_FALLOC_FL_KEEP_SIZE, _FALLOC_FL_PUNCH_HOLE = 0x01, 0x02


def mirror(root: str, key: str, name: str, block_bytes: int) -> str:
    """The mirror file under `root` of the shard `name` cached under `key`, with blocks of `block_bytes`."""
    return os.path.join(root, f"{key}-{block_bytes}", name)


def block_bytes_of(path: str) -> int:
    """A mirror's block size, from its name: `<cache key>-<block bytes>/<shard name>`."""
    return int(os.path.basename(os.path.dirname(path)).rpartition("-")[2])


def fs_block() -> int:
    """The filesystem block size under the blocks directory, asked once."""
    where = remote.blocks_dir()
    size = _FS_BLOCKS.get(where)
    if size is None:
        size = _FS_BLOCKS[where] = os.statvfs(where).f_bsize
    return size


def file_charge() -> int:
    """Disk a mirror takes before any page of it: the block of its own directory (a mirror is the one
    file of `<cache key>-<block bytes>/`, made with it and kept with it) and its first extent tree block."""
    return 2 * fs_block()


def page_blocks(block_bytes: int) -> int:
    """Blocks of `block_bytes` a page holds."""
    return max(1, PAGE_BYTES // block_bytes)


def charge(block_bytes: int, page: int, blocks: Iterable[int]) -> int:
    """Disk bytes the blocks `blocks` (indexes within the page) of page `page` of a mirror of
    `block_bytes` blocks may take: every filesystem block they touch, whole, plus the page's extent
    records. Exact for blocks of the filesystem's size; a smaller block costs the filesystem block it
    lies in, which its neighbours in it then share."""
    fs, first = fs_block(), page * page_blocks(block_bytes)
    if fs % block_bytes == 0:  # each block lies in one filesystem block, which `per` blocks share
        per = fs // block_bytes
        count = len({(first + bit) // per for bit in blocks})
    elif block_bytes % fs == 0:  # each block is block_bytes // fs filesystem blocks of its own
        count = len(set(blocks)) * (block_bytes // fs)
    else:
        touched: set[int] = set()
        for bit in blocks:
            lo = (first + bit) * block_bytes
            touched.update(range(lo // fs, (lo + block_bytes - 1) // fs + 1))
        count = len(touched)
    if not count:
        return 0
    lo = first * block_bytes
    spanned = (lo + page_blocks(block_bytes) * block_bytes - 1) // fs - lo // fs + 1
    return count * fs + _EXTENT * ((spanned + 1) // 2 + 1)


def read_blocks(path: str, blocks: Iterable[int], block_bytes: int) -> dict[int, bytes]:
    """The bytes the mirror holds at each of `blocks` (zeros for a hole; short or b"" past its end),
    unchecked: one open, and one pread a run of adjacent blocks."""
    wanted = sorted(set(blocks))
    if not wanted:
        return {}
    try:
        fd = os.open(path, os.O_RDONLY)
    except FileNotFoundError:
        return {}
    out: dict[int, bytes] = {}
    try:
        at = 0
        while at < len(wanted):
            first = end = wanted[at]
            while at + 1 < len(wanted) and wanted[at + 1] == end + 1:
                at, end = at + 1, end + 1
            at += 1
            data = os.pread(fd, (end - first + 1) * block_bytes, first * block_bytes)
            if end == first:
                out[first] = data
                continue
            for block in range(first, end + 1):
                lo = (block - first) * block_bytes
                out[block] = data[lo : lo + block_bytes]
    finally:
        os.close(fd)
    return out


def punch(path: str, offset: int, length: int) -> None:
    """Frees bytes [offset, offset + length) of a mirror on disk (fallocate PUNCH_HOLE, at once, even
    while another process has it open); they read as zeros. A mirror that is gone is no error."""
    libc = ctypes.CDLL(ctypes.util.find_library("c"), use_errno=True)
    try:
        fd = os.open(path, os.O_WRONLY)
    except FileNotFoundError:
        return
    try:
        mode = _FALLOC_FL_PUNCH_HOLE | _FALLOC_FL_KEEP_SIZE
        if length and libc.fallocate(fd, mode, ctypes.c_int64(offset), ctypes.c_int64(length)) != 0:
            code = ctypes.get_errno()
            raise OSError(
                code,
                f"cannot free cached blocks of {path} ({os.strerror(code)}): the dew block cache needs a "
                "filesystem that punches holes (ext4, xfs, tmpfs); point DEW_CACHE_DIR at one",
            )
    finally:
        os.close(fd)

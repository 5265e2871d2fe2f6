"""Where the block cache keeps a shard's mirror file, and reading its blocks back.

A mirror (dew.data.blockcache) holds each block at its offset in the shard, so a run of adjacent blocks
lies contiguous in it and is read by one pread, then cut into blocks. What is read is unchecked here:
a hole (a block never written, or punched out by an eviction, even while this read has the file open)
reads as zeros and a block past the file's end reads short, and the caller's crc32c check refuses both.
"""

from __future__ import annotations

import os
from collections.abc import Iterable


def mirror(root: str, key: str, name: str, block_bytes: int) -> str:
    """The mirror file under `root` of the shard `name` cached under `key`, with blocks of `block_bytes`."""
    return os.path.join(root, f"{key}-{block_bytes}", name)


def block_bytes_of(path: str) -> int:
    """A mirror's block size, from its name: `<cache key>-<block bytes>/<shard name>`."""
    return int(os.path.basename(os.path.dirname(path)).rpartition("-")[2])


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

"""How a committed directory names its shards: `<split>-SSSSS-of-NNNNN.<ext>`, and the files beside them.

Writers name every shard with shard_name, and readers tell a shard from any other file of the directory
with parse_shard_name; dew.data.formats re-exports each name, where meta.json's Shard checks its own.
"""

from __future__ import annotations

import os
import re

SHARD_EXTENSIONS = ("bin", "array_record", "parquet")
# The most shards a split can have: a shard name spells its index and count in five digits.
MAX_SHARDS = 99_999
# Beside a shard with block checksums: its crc32c per block (`train-00000-of-00004.bin.blocks`).
BLOCKS_SUFFIX = ".blocks"
_SHARD = re.compile(r"^(?P<split>[A-Za-z0-9_.]+)-(?P<index>\d{5})-of-(?P<count>\d{5})\.(?P<ext>[a-z_]+)$")


def shard_name(split: str, index: int, count: int, ext: str) -> str:
    """`train-00003-of-00016.bin`: the name every writer gives shard `index` of `count`."""
    if ext not in SHARD_EXTENSIONS:
        raise ValueError(f"shard extension {ext!r} is not one of {SHARD_EXTENSIONS}")
    if count > MAX_SHARDS:
        # `-of-100000` would not parse back as a shard name, and every reader would refuse the directory.
        raise ValueError(f"a split holds at most {MAX_SHARDS} shards, not {count}")
    if not 0 <= index < count:
        raise ValueError(f"shard index {index} is outside 0..{count - 1}")
    return f"{split}-{index:05d}-of-{count:05d}.{ext}"


def parse_shard_name(name: str) -> tuple[str, int, int, str] | None:
    """(split, index, count, ext) of a shard file name, or None for any other file."""
    match = _SHARD.match(os.path.basename(name))
    if not match:
        return None
    return match["split"], int(match["index"]), int(match["count"]), match["ext"]


def shard_extension(name: str) -> str:
    """The ext of a shard file name (`bin`, `array_record`, `parquet`); a ValueError for any other name."""
    parsed = parse_shard_name(name)
    if parsed is None:
        raise ValueError(f"{name!r} is not a shard name (<split>-SSSSS-of-NNNNN.<ext>)")
    return parsed[3]

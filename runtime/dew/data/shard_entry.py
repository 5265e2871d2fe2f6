"""One committed shard as meta.json records it (`Shard`), and the refusal of a version this dew cannot read.

dew.data.formats holds the envelope around these entries and re-exports both names, which is where
readers and writers take them from.
"""

from __future__ import annotations

import dataclasses
import os
import re
from typing import Any

from dew.data.errors import UserError
from dew.data.shard_names import parse_shard_name

_CRC32C = re.compile(r"^[0-9a-f]{8}$")


@dataclasses.dataclass(frozen=True)
class Shard:
    """One committed shard as meta.json records it.

    records: the records (ArrayRecord records, parquet rows, documents of a .bin) the shard holds;
    units: their total length in the kind's unit (Section.UNIT: token ids, or record bytes); crc32c: the
    file's CRC-32C as eight hex digits, a cheaper check than sha256 that writers since dew.tokens/2 record
    when google-crc32c is installed ("" when not recorded). Only sha256 enters the fingerprint.

    block_bytes and blocks_crc32c (writers since block checksums; 0 and "" before): the shard's block
    checksums lie beside it in `<name>.blocks` (`blocks_name`), the crc32c of each block_bytes bytes as
    big-endian uint32s, and blocks_crc32c is that file's own crc32c. A gs:// reader fetches byte ranges
    rounded out to whole blocks and checks each block before its bytes are used; a shard without them
    is fetched and checked whole. blocks_version (0 before the two-level layout, which writers record as 2):
    how `.blocks` is laid out and what blocks_crc32c covers (dew.data.block_sums).

    index_version and index_crc32c (ArrayRecord shards of writers since the record index; 0 and ""
    before): `<name>.index` (`record_index.index_name`) gives the byte range of each record's chunk
    and of what an ArrayRecordReader reads on open, so a gs:// reader fetches a batch's records only;
    index_crc32c is that file's crc32c. They come only with block checksums.
    """

    name: str
    records: int
    units: int
    bytes: int
    sha256: str
    crc32c: str = ""
    block_bytes: int = 0
    blocks_crc32c: str = ""
    blocks_version: int = 0
    index_version: int = 0
    index_crc32c: str = ""

    def __post_init__(self) -> None:
        if parse_shard_name(self.name) is None or os.path.basename(self.name) != self.name:
            raise ValueError(f"shard name {self.name!r} is not <split>-SSSSS-of-NNNNN.<ext> inside the directory")
        for name in ("records", "units", "bytes", "block_bytes", "blocks_version", "index_version"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"shard {self.name}: {name} must be a non-negative int, got {value!r}")
        if self.crc32c and not (isinstance(self.crc32c, str) and _CRC32C.match(self.crc32c)):
            raise ValueError(f"shard {self.name}: crc32c must be eight lowercase hex digits, got {self.crc32c!r}")
        if bool(self.block_bytes) != bool(self.blocks_crc32c) or (
            self.blocks_crc32c and not (isinstance(self.blocks_crc32c, str) and _CRC32C.match(self.blocks_crc32c))
        ):
            raise ValueError(
                f"shard {self.name}: block_bytes and blocks_crc32c (eight lowercase hex digits) come together, "
                f"got {self.block_bytes!r} and {self.blocks_crc32c!r}"
            )

        # Lazily: both modules read shards, so they import this one.
        from dew.data.block_sums import BLOCKS_VERSION
        from dew.data.record_index import INDEX_VERSION

        if self.blocks_version > BLOCKS_VERSION:
            raise newer_version(
                f"shard {self.name}: blocks_version (the layout of its .blocks)", self.blocks_version, BLOCKS_VERSION
            )
        if self.index_version > INDEX_VERSION:
            raise newer_version(
                f"shard {self.name}: index_version (the layout of its .index)", self.index_version, INDEX_VERSION
            )
        if self.blocks_version and not self.block_bytes:
            raise ValueError(f"shard {self.name}: blocks_version comes only with block checksums")
        if bool(self.index_version) != bool(self.index_crc32c) or (self.index_version and not self.block_bytes):
            raise ValueError(
                f"shard {self.name}: index_version and index_crc32c come together, and only with block checksums, "
                f"got {self.index_version!r}, {self.index_crc32c!r} and block_bytes {self.block_bytes!r}"
            )
        if self.index_crc32c and not (isinstance(self.index_crc32c, str) and _CRC32C.match(self.index_crc32c)):
            raise ValueError(
                f"shard {self.name}: index_crc32c must be eight lowercase hex digits, got {self.index_crc32c!r}"
            )

    def to_json(self) -> dict[str, Any]:
        entry = dataclasses.asdict(self)
        for name in ("crc32c", "block_bytes", "blocks_crc32c", "blocks_version", "index_version", "index_crc32c"):
            if not entry[name]:
                del entry[name]  # as an older writer wrote it
        return entry


class NewerFormatError(UserError, ValueError):
    """meta.json records a version (of its format, a shard's `.blocks` or `.index`) newer than this dew
    reads: a newer dew wrote it, so the fix is to upgrade, not to rewrite the corpus."""


def newer_version(what: str, found: object, reads: object) -> NewerFormatError:
    """The refusal of `what` at version `found`, where this dew reads up to version `reads`."""
    return NewerFormatError(
        f"{what} is version {found}, and this dew reads version {reads}: upgrade dew to read it, or rerun the "
        "preprocess job with this one"
    )

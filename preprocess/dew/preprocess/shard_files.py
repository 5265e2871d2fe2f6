"""One adapter per shard file format: ordered records (bytes) → one local `.bin`, ArrayRecord or parquet file.

Every kind of record reaches a shard file as bytes: token ids as their raw bytes in the corpus dtype,
every other kind as a packed dict (dew.data.codec). The directory's section (dew.data.sections) says
which, and each file format stores them its own way:

- `bin`: records back to back, no framing; only token ids, whose boundaries the reader finds by eos;
- `array_record`: one record each, `group_size:1` so every record is addressable on its own;
- `parquet`: token ids as one list column `tokens`; a packed dict as one binary column per field.

The bytes of a file depend only on the records and their order, so every runner writes the same file.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Iterable, Iterator
from typing import Any

import numpy as np

from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.extras import require
from dew.data.formats import SHARD_EXTENSIONS
from dew.data.sections import Section, TokensSection
from dew.preprocess.parked import Parked

# Records per parquet row group: fixed, so the file layout never depends on timing.
PARQUET_ROWS = 4096
TOKEN_COLUMN = "tokens"


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardFormat:
    """What the shard files of a directory are: their file format and the kind of record they hold."""

    ext: str
    section: Section

    def __post_init__(self) -> None:
        if self.ext not in SHARD_EXTENSIONS:
            raise ValueError(f"shard format {self.ext!r} is not one of {', '.join(SHARD_EXTENSIONS)}")
        if self.ext == "bin" and not self.holds_ids:
            raise ValueError(
                f"{self.section.KIND} records cannot go into .bin shards, which keep no record boundaries; "
                "write array_record or parquet"
            )

    @property
    def holds_ids(self) -> bool:
        return isinstance(self.section, TokensSection)

    @property
    def dtype(self) -> np.dtype:
        """The dtype of a record's values: the corpus's ids, or bytes for a packed record."""
        return np.dtype(self.section.dtype) if isinstance(self.section, TokensSection) else np.dtype(np.uint8)

    @property
    def fields(self) -> tuple[str, ...]:
        """The fields of a packed record, in the order every record holds them."""
        return getattr(self.section, "fields", ())

    def units(self, record: bytes | Parked) -> int:
        """A record's length in the section's unit: ids for tokens, bytes for packed records."""
        size = record.size if isinstance(record, Parked) else len(record)
        if size % self.dtype.itemsize:
            raise ValueError(f"a record of {size} bytes is not whole {self.dtype} ids")
        return size // self.dtype.itemsize

    @property
    def piece_field(self) -> str:
        """What one piece of the piece index holds: the parquet column of ids, else the whole record ("")."""
        return TOKEN_COLUMN if self.holds_ids and self.ext == "parquet" else ""


def write_shard_file(path: str, fmt: ShardFormat, records: Iterable[bytes]) -> None:
    """Writes `records` in order to the local file `path` in the shard format `fmt`."""
    _WRITERS[fmt.ext](path, fmt, records)


def _write_bin(path: str, fmt: ShardFormat, records: Iterable[bytes]) -> None:
    with open(path, "wb") as f:
        for record in records:
            f.write(record)


def _write_array_record(path: str, fmt: ShardFormat, records: Iterable[bytes]) -> None:
    from array_record.python.array_record_module import ArrayRecordWriter

    writer = ArrayRecordWriter(path, "group_size:1")
    try:
        for record in records:
            writer.write(record)
    finally:
        writer.close()


def _write_parquet(path: str, fmt: ShardFormat, records: Iterable[bytes]) -> None:
    pq = require("pyarrow.parquet", for_what="parquet shards")

    table = _ids_table if fmt.holds_ids else _fields_table
    with pq.ParquetWriter(path, _schema(fmt)) as writer:
        empty = True
        for group in _groups(records):
            writer.write_table(table(group, fmt))
            empty = False
        if empty:  # an empty shard still holds its schema and one empty row group
            writer.write_table(table([], fmt))


def _groups(records: Iterable[bytes]) -> Iterator[list[bytes]]:
    group: list[bytes] = []
    for record in records:
        group.append(record)
        if len(group) == PARQUET_ROWS:
            yield group
            group = []
    if group:
        yield group


def _schema(fmt: ShardFormat) -> Any:
    pa = require("pyarrow", for_what="parquet shards")

    if fmt.holds_ids:
        return pa.schema([(TOKEN_COLUMN, pa.list_(pa.from_numpy_dtype(fmt.dtype)))])
    return pa.schema([(field, pa.binary()) for field in fmt.fields])


def _ids_table(group: list[bytes], fmt: ShardFormat) -> Any:
    pa = require("pyarrow", for_what="parquet shards")

    dtype = fmt.dtype
    lengths = np.fromiter((len(r) // dtype.itemsize for r in group), dtype=np.int32, count=len(group))
    offsets = np.zeros(len(group) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.frombuffer(b"".join(group), dtype=dtype)
    values = pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=pa.from_numpy_dtype(dtype)))
    return pa.Table.from_arrays([values], schema=_schema(fmt))


def _fields_table(group: list[bytes], fmt: ShardFormat) -> Any:
    pa = require("pyarrow", for_what="parquet shards")

    fields = fmt.fields
    columns: dict[str, list[bytes]] = {field: [] for field in fields}
    for row, record in enumerate(group):
        entries = unpack_dict_of_byte_arrays(record, f"record {row} of a parquet row group")
        if list(entries) != list(fields):
            raise ValueError(f"a {fmt.section.KIND} record holds fields {list(entries)}, meta.json declares {fields}")
        for field, value in entries.items():
            columns[field].append(value)
    return pa.Table.from_pydict(columns, schema=_schema(fmt))


_WRITERS: dict[str, Callable[[str, ShardFormat, Iterable[bytes]], None]] = {
    "bin": _write_bin,
    "array_record": _write_array_record,
    "parquet": _write_parquet,
}

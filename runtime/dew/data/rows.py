"""Rows of a parquet file or of JSON records, and ragged id columns packed for batch reads.

The supervised and RL specs read small tables (thousands to millions of rows) whole at load, check every
row once, and keep the ids as one flat array plus offsets. That keeps a Grain worker's pickle a few
arrays rather than millions of Python lists, and lets a batch be cut out with a handful of vectorised
numpy calls instead of a loop over rows.
"""

from __future__ import annotations

import dataclasses
import hashlib
import json
import numbers
import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import remote
from dew.data.extras import require


def where(path: str | None, row: int) -> str:
    """How an error names a row: the file and its row number, or the index of a JSON record."""
    return f"record {row}" if path is None else f"row {row} of {path}"


def check_source(kind: str, path: str | None, json_records: Sequence[str]) -> None:
    """A spec reads either a parquet path or JSON records; both or neither is a config mistake."""
    if (path is None) == (not json_records):
        raise ValueError(
            f"{kind} reads exactly one of path= (a parquet file) or records= (JSON rows), not both or neither"
        )
    for i, record in enumerate(json_records):
        if not isinstance(record, str):
            raise TypeError(f"{kind}.records[{i}] must be one JSON object as a string, got {type(record).__name__}")


def read_table(path: str, columns: Sequence[str], optional: Sequence[str] = ()) -> Any:
    """The named columns of a parquet file (local or any fsspec URL), refusing a missing one by name."""
    pq = require("pyarrow.parquet", for_what=f"reading parquet ({path})")

    def read(source: Any) -> Any:
        try:
            schema = pq.read_schema(source)
        except (OSError, ValueError) as error:  # pyarrow's ArrowInvalid is a ValueError, ArrowIOError an OSError
            raise ValueError(f"{path} is not a readable parquet file ({error})") from None
        missing = [c for c in columns if c not in schema.names]
        if missing:
            raise ValueError(
                f"{path} has no column {', '.join(map(repr, missing))}; its columns are {', '.join(schema.names)}"
            )
        wanted = [*columns, *(c for c in optional if c in schema.names)]
        return pq.read_table(source, columns=wanted)

    if "://" not in path:
        local = remote.resolve(path)
        if not os.path.exists(local):
            raise FileNotFoundError(f"no parquet file at {path}")
        return read(local)
    if remote.is_remote(path):
        # The whole table is read anyway; dew's own client brings the retries, Retry-After, proxy and
        # CA bundle every gs:// read has, which gcsfs's aiohttp client would not.
        data = remote.read_bytes(path)
    else:
        # fsspec is no extra's own requirement: gcsfs, of the gcs extra, installs it.
        fsspec = require("fsspec", for_what=f"reading {path}", extra="gcs")
        with fsspec.open(path, "rb") as opened:
            data = opened.read()
    return read(require("pyarrow", for_what=f"reading parquet ({path})").BufferReader(data))


def json_rows(json_records: Sequence[str], columns: Sequence[str]) -> list[dict[str, Any]]:
    """Parses JSON records, each an object holding every one of `columns`, naming the record that is not."""
    rows = []
    for i, record in enumerate(json_records):
        try:
            row = json.loads(record)
        except json.JSONDecodeError as error:
            raise ValueError(f"{where(None, i)} is not valid JSON: {error}") from None
        if not isinstance(row, Mapping):
            raise ValueError(f"{where(None, i)} is a JSON {type(row).__name__}, not an object")
        missing = [c for c in columns if c not in row]
        if missing:
            raise ValueError(f"{where(None, i)} has no field {', '.join(map(repr, missing))}; it has {sorted(row)}")
        rows.append(dict(row))
    return rows


@dataclasses.dataclass(frozen=True, eq=False)
class Ragged:
    """Rows of ids of differing lengths: row i is values[offsets[i]:offsets[i + 1]]."""

    values: np.ndarray
    offsets: np.ndarray

    @classmethod
    def from_lists(cls, rows: Sequence[Sequence[int]], *, name: str, path: str | None = None) -> Ragged:
        lengths = np.zeros(len(rows) + 1, dtype=np.int64)
        for i, row in enumerate(rows):
            if row is None or isinstance(row, str | bytes | Mapping):
                raise ValueError(f"{where(path, i)}: {name} must be a list of token ids, got {row!r:.80}")
            lengths[i + 1] = len(row)
        offsets = np.cumsum(lengths)
        flat = [_an_id(v, name, path, i) for i, row in enumerate(rows) for v in row] if offsets[-1] else []
        return cls(_ids(np.asarray(flat, dtype=np.int64), name, path, offsets), offsets)

    @classmethod
    def from_arrow(cls, column: Any, *, name: str, path: str) -> Ragged:
        """A list<int> parquet column, read through its offsets without a Python object per id."""
        import pyarrow as pa
        import pyarrow.compute as pc

        column = column.combine_chunks() if isinstance(column, pa.ChunkedArray) else column
        if not (pa.types.is_list(column.type) or pa.types.is_large_list(column.type)) or not pa.types.is_integer(
            column.type.value_type
        ):
            raise ValueError(f"{path}: column {name!r} must hold lists of integer token ids, not {column.type}")
        if column.null_count:
            row = int(pc.index(pc.is_null(column), True).as_py())
            raise ValueError(f"{where(path, row)}: {name} is null")
        offsets = np.asarray(column.offsets, dtype=np.int64)
        values = np.asarray(column.values.fill_null(-1), dtype=np.int64)[offsets[0] : offsets[-1]]
        offsets = offsets - offsets[0]
        return cls(_ids(values, name, path, offsets), offsets)

    def __len__(self) -> int:
        return len(self.offsets) - 1

    @property
    def lengths(self) -> np.ndarray:
        return np.diff(self.offsets)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.values[self.offsets[index] : self.offsets[index + 1]]

    def digest(self) -> str:
        """A hash of the ids, so a saved position can tell this table from an edited one."""
        hasher = hashlib.sha256(self.offsets.astype("<i8").tobytes())
        hasher.update(self.values.astype("<i4").tobytes())
        return hasher.hexdigest()

    def scatter(self, rows: np.ndarray, out: np.ndarray, start: np.ndarray | int = 0, *, right: bool = False) -> None:
        """Writes rows `rows` into out[b, start_b:] in place, or right-aligned against the end with right=True."""
        rows = np.asarray(rows, dtype=np.int64)
        lengths = self.offsets[rows + 1] - self.offsets[rows]
        total = int(lengths.sum())
        if not total:
            return
        batch_row = np.repeat(np.arange(len(rows)), lengths)
        within = np.arange(total) - np.repeat(np.cumsum(lengths) - lengths, lengths)
        first = out.shape[-1] - lengths if right else np.broadcast_to(np.asarray(start, dtype=np.int64), lengths.shape)
        source = np.repeat(self.offsets[rows], lengths) + within
        out[batch_row, np.repeat(first, lengths) + within] = self.values[source]


def _an_id(value: Any, name: str, path: str | None, row: int) -> int:
    """One id of a JSON or Python row: an integer, never a float, bool or string int() would truncate."""
    if isinstance(value, bool) or not isinstance(value, numbers.Integral):
        raise ValueError(f"{where(path, row)}: {name} holds {value!r:.40}, which is no token id")
    return int(value)


def _ids(values: np.ndarray, name: str, path: str | None, offsets: np.ndarray) -> np.ndarray:
    """Token ids as int32, refusing a negative or null id by the row that holds it."""
    bad = np.flatnonzero((values < 0) | (values > np.iinfo(np.int32).max))
    if bad.size:
        row = int(np.searchsorted(offsets, bad[0], side="right") - 1)
        raise ValueError(f"{where(path, row)}: {name} holds {int(values[bad[0]])}, which is no token id")
    return values.astype(np.int32)

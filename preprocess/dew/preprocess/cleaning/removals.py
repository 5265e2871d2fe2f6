"""Removal tables: one parquet table beside each shard, a row for every document removed from it.

A removed document belongs to the shard its id draws (dew.data.sections.document_shard), the one it
would have been written to, so a removal table is as large as one shard's removals and is written by
the worker that groups that shard: `train-00003-of-00016.removals.parquet` beside
`train-00003-of-00016.parquet`. Its rows, sorted by id:

    id            the removed document's stable id
    reason        a quality reason code, exact_duplicate or near_duplicate
    duplicate_of  for a duplicate, the id of the kept document of its cluster; else null
    duplicate_in  for a duplicate, "" when that document is in this directory, else the path of the
                  --against corpus holding it; else null
    source, row   where the removed document was read, whose hash is its id (document_id)

Importing it imports no Beam: `dew-preprocess inspect` reads the tables to show removals.
"""

from __future__ import annotations

import hashlib
import io
import os
from collections.abc import Iterable
from typing import Any

from dew.data import remote
from dew.data.extras import require
from dew.preprocess.constants import REMOVALS_SUFFIX

COLUMNS = ("id", "reason", "duplicate_of", "duplicate_in", "source", "row")
Removal = tuple[str, str, str | None, str | None, str, int]


def document_id(source: str, row: int) -> str:
    """A document's stable id: a hash of where it was read, its source as the job was given it and its row."""
    return hashlib.blake2b(f"{source}\0{row}".encode(), digest_size=8).hexdigest()


def removals_name(shard: str) -> str:
    return os.path.splitext(shard)[0] + REMOVALS_SUFFIX


def _schema() -> Any:
    pa = require("pyarrow", for_what="removal tables")
    types = (pa.string(), pa.string(), pa.string(), pa.string(), pa.string(), pa.int64())
    return pa.schema(list(zip(COLUMNS, types, strict=True)))


def table_bytes(rows: Iterable[Removal]) -> bytes:
    """The parquet bytes of a removal table: rows sorted by id, fixed layout, no clock time."""
    pa = require("pyarrow", for_what="removal tables")
    pq = require("pyarrow.parquet", for_what="removal tables")
    ordered = sorted(rows)
    columns = {name: [row[i] for row in ordered] for i, name in enumerate(COLUMNS)}
    out = io.BytesIO()
    pq.write_table(pa.Table.from_pydict(columns, schema=_schema()), out, row_group_size=1 << 16)
    return out.getvalue()


def read_table(path: str) -> list[dict[str, Any]]:
    """A removal table's rows as dicts, in id order (a local path or gs://)."""
    pq = require("pyarrow.parquet", for_what="removal tables")
    source = io.BytesIO(remote.read_bytes(path)) if remote.is_remote(path) else path
    return pq.read_table(source).to_pylist()

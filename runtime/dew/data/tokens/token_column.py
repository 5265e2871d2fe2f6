"""TokenColumn: a token stream held in a parquet column of ids, read a row group at a time."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any

import numpy as np

from dew.data import formats, ranges
from dew.data.extras import require
from dew.data.pieces import PieceIndex, ends_at
from dew.data.tokens.sources import (
    DEFAULT_DTYPE,
    Pieces,
    cast_ids,
    outside,
    refuse_id,
    verify_files,
)


def _parquet_file(pq: Any, path: str, ranged: Mapping[str, ranges.RangedShard] | None = None) -> Any:
    """pyarrow's ParquetFile over `path` (read by range when `ranged` holds it), its errors (which name
    no file) naming it."""
    try:
        return pq.ParquetFile(ranges.RangedFile(ranged[path]) if ranged and path in ranged else path)
    except formats.DamagedError:
        raise  # a block that failed its checksum, named by shard and block
    except (OSError, ValueError) as error:  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise ValueError(f"{path} is not a readable parquet file ({error}); rerun the preprocess job") from None


class TokenColumn(Pieces):
    """One parquet column of id lists, every row of every file in order, as one stream.

    Spans are read one row group at a time (the last few kept), so a file is never loaded whole.
    column may be omitted for files with a single column. pieces is the row index the preprocess job
    writes ahead (`<split>.pieces.npz`); without it, building the source reads the column once to learn
    each row's id count. shards, meta.json's entries for paths, has each file checked against its
    checksum before it is opened; ids at or above vocab_size are refused as they are read.

    Args:
        paths: The parquet files, in corpus order.
        column: The column of id lists; needed only when a file holds more than one column.
        dtype: The dtype the ids are read as.
        eos_id: The id that closes a document, if the corpus has one.
        pieces: Each row's id count, as the preprocess job writes it; None to count them now.
        shards: meta.json's entries for `paths`, to check each file against its checksum.
        vocab_size: Ids at or above it are refused; None checks none.
        ranged: The gs:// files with block checksums, read by range rather than fetched whole.

    Examples:
        >>> import os, tempfile
        >>> import pyarrow as pa, pyarrow.parquet as pq
        >>> path = os.path.join(tempfile.mkdtemp(), "part-0.parquet")
        >>> pq.write_table(pa.table({"input_ids": [[5, 6, 0], [7, 8, 9, 0]]}), path)
        >>> from dew.data import TokenColumn
        >>> tokens = TokenColumn([path], eos_id=0)  # one column: no name needed
        >>> len(tokens), tokens[3:7].tolist()
        (7, [7, 8, 9, 0])
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        column: str | None = None,
        dtype: np.dtype = DEFAULT_DTYPE,
        eos_id: int | None = None,
        pieces: PieceIndex | None = None,
        shards: Sequence[formats.Shard] | None = None,
        vocab_size: int | None = None,
        ranged: Sequence[ranges.RangedShard] | None = None,
    ) -> None:
        pq = require("pyarrow.parquet", for_what="TokenColumn over parquet")

        self.paths, self.dtype, self.eos_id = tuple(paths), np.dtype(dtype), eos_id
        self.vocab_size = vocab_size
        # gs:// files read by range, footer and row groups alike: no file is fetched whole.
        self.ranged = {shard.uri: shard for shard in ranged or ()}
        if not self.paths:
            raise ValueError("TokenColumn needs at least one parquet file")
        verify_files(self.paths, shards)  # every footer is read now, so every file is checked now
        names, groups, group_rows, file_rows = [], [], [], []
        for path in self.paths:
            file = _parquet_file(pq, path, self.ranged)  # the footer only: row group sizes, no column data
            columns = file.schema_arrow.names
            name = column if column is not None else (columns[0] if len(columns) == 1 else None)
            if name is None or name not in columns:
                raise ValueError(f"{path}: name the token column (column=); the file holds {columns}")
            names.append(name)
            for group in range(file.num_row_groups):
                groups.append((path, group))
                group_rows.append(file.metadata.row_group(group).num_rows)
            file_rows.append(file.metadata.num_rows)
        self.column = names[0] if len(set(names)) == 1 else column
        self.groups = tuple(groups)
        self._cache: dict[int, np.ndarray] = {}
        if pieces is None:
            pieces = self.scan(names)
        elif pieces.counts.tolist() != file_rows or pieces.field != self.column:
            raise ValueError(
                f"the piece index given for {self.paths[0]} and its siblings describes {pieces.counts.tolist()} rows "
                f"of column {pieces.field!r}, but the files hold {file_rows} rows and column {self.column!r} is read"
            )
        self.pieces = pieces
        # A row group ends where its last row does; an empty group ends where the one before it did.
        self.piece_ends = ends_at(pieces.ends, np.cumsum(np.array(group_rows, dtype=np.int64)))

    def scan(self, names: Sequence[str]) -> PieceIndex:
        """Reads each file's column once for every row's id count: the index the preprocess job writes ahead."""
        pc = require("pyarrow.compute", for_what="TokenColumn over parquet")
        pq = require("pyarrow.parquet", for_what="TokenColumn over parquet")

        lengths = []
        for path, name in zip(self.paths, names, strict=True):
            file, rows = _parquet_file(pq, path, self.ranged), []
            for group in range(file.num_row_groups):
                values = file.read_row_group(group, columns=[name]).column(0)
                rows.append(pc.fill_null(pc.list_value_length(values), 0).to_numpy().astype(np.int64))
            lengths.append(np.concatenate(rows) if rows else np.zeros(0, dtype=np.int64))
        return PieceIndex.of_lengths(lengths, field=self.column or "")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_cache": {}}

    def piece(self, index: int) -> np.ndarray:
        """The ids of row group `index`, counting through every file in order."""
        cached = self._cache.get(index)
        if cached is None:
            pq = require("pyarrow.parquet", for_what="TokenColumn over parquet")
            path, group = self.groups[index]
            try:
                table = _parquet_file(pq, path, self.ranged).read_row_group(group, columns=[self.column])
            except (OSError, ValueError) as error:
                raise formats.DamagedError(
                    f"{path} row group {group} cannot be read ({error}); the file is damaged"
                ) from None
            values = table.column(0).combine_chunks().flatten().to_numpy(zero_copy_only=False)
            cached = cast_ids(np.asarray(values), self.dtype, f"{path} row group {group} column {self.column!r}")
            at = outside(cached, self.vocab_size)
            if at is not None:
                assert self.vocab_size is not None
                first = index - group  # the file's first row group: a file's groups are numbered from 0
                offset = self._start(index) - self._start(first) + at
                raise refuse_id(path, int(cached[at]), offset, self.vocab_size)
            if len(self._cache) >= 4:
                self._cache.pop(next(iter(self._cache)))
            self._cache[index] = cached
        return cached

    def _start(self, index: int) -> int:
        return int(self.piece_ends[index - 1]) if index else 0

    def describe(self) -> dict[str, Any]:
        return {
            "tokens": "parquet",
            "files": [os.path.basename(p) for p in self.paths],
            "column": self.column,
            "ids": len(self),
        }

"""TokenRecords: a token stream held in ArrayRecord records, read by contiguous record ranges."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats
from dew.data.codec import unpack_field
from dew.data.pieces import PieceIndex, ends_at
from dew.data.tokens.sources import (
    DEFAULT_DTYPE,
    Pieces,
    outside,
    refuse_id,
    verify_files,
)


class TokenRecords(Pieces):
    """Id arrays in ArrayRecord shards, every record of every file in order, as one stream.

    A record is the ids' raw bytes, or with field set a packed dict of byte arrays holding them under
    field. pieces is the record index the preprocess job writes ahead (`<split>.pieces.npz`); without
    it, building the source reads every record once to learn the lengths. Files open on first read,
    and spans read contiguous record ranges, ArrayRecord's fastest access. shards, meta.json's entries
    for paths, has each file checked against its checksum when it is first opened; ids at or above
    vocab_size are refused as they are read. With `by_record`, the committed gs:// directory whose
    shards paths are (each with a record index), records are read by range (dew.data.record_shards).

    Args:
        paths: The ArrayRecord files, in corpus order.
        field: The key of the ids in each record's packed dict; None when a record is the ids' bytes.
        dtype: The dtype the ids were written as.
        eos_id: The id that closes a document, if the corpus has one.
        pieces: Each record's id count, as the preprocess job writes it; None to read them now.
        shards: meta.json's entries for `paths`, to check each file against its checksum.
        vocab_size: Ids at or above it are refused; None checks none.
        by_record: The committed gs:// directory and its shards, to read records by range.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from array_record.python.array_record_module import ArrayRecordWriter
        >>> path = os.path.join(tempfile.mkdtemp(), "train-00000.array_record")
        >>> writer = ArrayRecordWriter(path, "group_size:1")
        >>> for document in ([5, 6, 0], [7, 8, 9, 0]):
        ...     writer.write(np.array(document, dtype=np.uint16).tobytes())
        >>> writer.close()
        >>> from dew.data import TokenRecords
        >>> tokens = TokenRecords([path], eos_id=0)
        >>> len(tokens), tokens[3:7].tolist()
        (7, [7, 8, 9, 0])
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        field: str | None = None,
        dtype: np.dtype = DEFAULT_DTYPE,
        eos_id: int | None = None,
        pieces: PieceIndex | None = None,
        shards: Sequence[formats.Shard] | None = None,
        vocab_size: int | None = None,
        by_record: tuple[str, Sequence[formats.Shard]] | None = None,
    ) -> None:
        self.paths, self.field, self.dtype, self.eos_id = tuple(paths), field, np.dtype(dtype), eos_id
        self.shards = None if shards is None else tuple(shards)
        self.vocab_size = vocab_size
        if not self.paths:
            raise ValueError("TokenRecords needs at least one ArrayRecord file")
        self._by_record = None
        if by_record is not None:
            from dew.data.record_shards import ShardReaders

            if pieces is None:
                raise ValueError("a TokenRecords read by record needs the offline piece index")
            self._by_record = ShardReaders(self.paths, directory=by_record[0], shards=by_record[1])
        self._readers: dict[int, Any] = {}
        self.pieces: PieceIndex | None = None
        if pieces is None:
            pieces = self.scan()
        elif len(pieces.counts) != len(self.paths) or pieces.field != (field or ""):
            raise ValueError(
                f"the piece index given for {self.paths[0]} and its siblings describes {len(pieces.counts)} files "
                f"of {pieces.field or 'raw'!r} records, not these {len(self.paths)} files of {field or 'raw'!r} records"
            )
        self.pieces = pieces
        self.record_ends = pieces.shard_piece_ends
        self.piece_ends = pieces.ends

    def scan(self) -> PieceIndex:
        """Reads every record once for its length: the index the preprocess job writes ahead."""
        lengths = []
        for file in range(len(self.paths)):
            count, sizes = self._reader(file).num_records(), list[int]()
            for lo in range(0, count, 4096):
                sizes.extend(len(r) for r in self._read(file, lo, min(count, lo + 4096)))
            lengths.append(np.array(sizes, dtype=np.int64))
        return PieceIndex.of_lengths(lengths, field=self.field or "")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_readers": {}}

    def open_handle(self) -> list[Any]:
        """One ArrayRecordReader per file, opened for random access."""
        return [self._open_file(file) for file in range(len(self.paths))]

    def _open_file(self, file: int) -> Any:
        from array_record.python.array_record_module import ArrayRecordReader

        path = self.paths[file]
        if not os.path.exists(path):
            raise FileNotFoundError(f"no ArrayRecord file at {path}")
        if self.shards is not None:
            verify_files([path], [self.shards[file]])
        try:
            reader = ArrayRecordReader(path, "readahead_buffer_size:0")
        except Exception as error:  # the C++ reader raises bare RuntimeErrors with no path
            raise formats.DamagedError(f"{path} is not a readable ArrayRecord file: {error}") from None
        if not reader.ok():
            raise formats.DamagedError(f"{path} is not a readable ArrayRecord file (corrupt or truncated)")
        if self.pieces is not None and reader.num_records() != int(self.pieces.counts[file]):
            raise ValueError(
                f"{path} holds {reader.num_records()} records but its piece index records "
                f"{int(self.pieces.counts[file])}; delete the index file or rerun the preprocess job"
            )
        return reader

    def _reader(self, file: int) -> Any:
        reader = self._readers.get(file)
        if reader is None:
            reader = self._readers[file] = self._open_file(file)
        return reader

    def _read(self, file: int, lo: int, hi: int) -> list[np.ndarray]:
        path = self.paths[file]
        try:
            if self._by_record is not None:  # its own errors name the shard
                raw = self._by_record.read(np.full(hi - lo, file), np.arange(lo, hi))
            else:
                raw = self._reader(file).read(lo, hi)
        except formats.DamagedError:
            raise  # opening it found the damage, and says which file and what to do
        except Exception as error:
            raise formats.DamagedError(
                f"{path}: records {lo}..{hi} cannot be read ({error}); the shard is corrupt"
            ) from None
        decoded = [self._decode(r, path, lo + i) for i, r in enumerate(raw)]
        if self.pieces is not None and self.vocab_size is not None and decoded:  # None while scan learns lengths
            at = outside(np.concatenate(decoded), self.vocab_size)
            if at is not None:
                first = int(self.record_ends[file - 1]) if file else 0
                record_start, file_start = ends_at(self.piece_ends, np.array([first + lo, first])).tolist()
                offset = record_start - file_start + at
                value = int(np.concatenate(decoded)[at])
                raise refuse_id(path, value, offset, self.vocab_size)
        return decoded

    def _decode(self, record: bytes, path: str, index: int) -> np.ndarray:
        if self.field is not None:
            record = unpack_field(record, self.field, f"{path} record {index}")
        if len(record) % self.dtype.itemsize:
            raise ValueError(f"{path} record {index}: {len(record)} bytes are not whole {self.dtype} ids")
        return np.frombuffer(record, dtype=self.dtype)

    def piece(self, index: int) -> np.ndarray:
        """The ids of record `index`, counting through every file in order."""
        return self._pieces(index, index + 1)[0]

    def _pieces(self, first: int, last: int) -> list[np.ndarray]:
        out = []
        while first < last:
            file = int(np.searchsorted(self.record_ends, first, side="right"))
            base = int(self.record_ends[file - 1]) if file else 0
            hi = min(last, int(self.record_ends[file]))
            out.extend(self._read(file, first - base, hi - base))
            first = hi
        return out

    def describe(self) -> dict[str, Any]:
        return {
            "tokens": "array_record",
            "files": [os.path.basename(p) for p in self.paths],
            "field": self.field,
            "ids": len(self),
        }

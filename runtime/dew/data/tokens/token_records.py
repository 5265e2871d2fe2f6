"""TokenRecords: a token stream held in ArrayRecord records, read by contiguous record ranges."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats
from dew.data.codec import unpack_field
from dew.data.pieces import PieceIndex, ends_at
from dew.data.record_shards import ShardReaders
from dew.data.tokens.sources import DEFAULT_DTYPE, Pieces, outside, refuse_id


class TokenRecords(Pieces):
    """Id arrays in ArrayRecord shards, every record of every file in order, as one stream.

    A record is the ids' raw bytes, or with field set a packed dict of byte arrays holding them under
    field. pieces is the record index the preprocess job writes ahead (`<split>.pieces.npz`); without
    it, building the source reads every record once to learn the lengths. Files open on first read,
    and spans read contiguous record ranges, ArrayRecord's fastest access. With shards, meta.json's
    entries for paths, the files are the committed shards of `directory` and read as images and clips
    are (dew.data.record_shards): each is checked against meta.json when it is first opened (a local
    one hashed, a gs:// one fetched whole, or read by range when it carries a record index); ids at or
    above vocab_size are refused as they are read.

    Args:
        paths: The ArrayRecord files, in corpus order.
        field: The key of the ids in each record's packed dict; None when a record is the ids' bytes.
        dtype: The dtype the ids were written as.
        eos_id: The id that closes a document, if the corpus has one.
        pieces: Each record's id count, as the preprocess job writes it; None to read them now.
        shards: meta.json's entries for `paths`, to check each file against its checksum.
        vocab_size: Ids at or above it are refused; None checks none.
        directory: The committed directory `shards` are of; by default the one paths[0] lies in.

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
        directory: str | None = None,
    ) -> None:
        self.paths, self.field, self.dtype, self.eos_id = tuple(paths), field, np.dtype(dtype), eos_id
        self.shards = None if shards is None else tuple(shards)
        self.vocab_size = vocab_size
        if not self.paths:
            raise ValueError("TokenRecords needs at least one ArrayRecord file")
        if self.shards is not None and directory is None:
            directory = os.path.dirname(self.paths[0])  # a committed split's shards lie side by side
        # One reader of ArrayRecord shards for every kind (dew.data.record_shards): local, fetched whole,
        # or read by range, a span's records in one read.
        self.readers = ShardReaders(self.paths, directory=directory, shards=self.shards)
        self._counted: set[int] = set()  # files whose footer was found to agree with the piece index
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
            count, sizes = self.readers.count(file), list[int]()
            for lo in range(0, count, 4096):
                sizes.extend(len(r) for r in self._read(file, lo, min(count, lo + 4096)))
            lengths.append(np.array(sizes, dtype=np.int64))
        return PieceIndex.of_lengths(lengths, field=self.field or "")

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_counted": set()}  # the readers reopen, and are counted again, where unpickled

    def open_handle(self) -> list[Any]:
        """One ArrayRecordReader per file, opened for random access: this source's own, not to be closed."""
        return [self.readers.reader(file) for file in range(len(self.paths))]

    def _count(self, file: int) -> None:
        """Refuses a file whose footer counts other records than the piece index says, before a read of it
        is cut by that index."""
        assert self.pieces is not None
        found, indexed = self.readers.count(file), int(self.pieces.counts[file])
        if found != indexed:
            raise ValueError(
                f"{self.paths[file]} holds {found} records but its piece index records "
                f"{indexed}; delete the index file or rerun the preprocess job"
            )
        self._counted.add(file)

    def _read(self, file: int, lo: int, hi: int) -> list[np.ndarray]:
        path = self.paths[file]
        if self.pieces is not None and file not in self._counted:
            self._count(file)
        raw = self.readers.read_range(file, lo, hi)  # its errors name the shard
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

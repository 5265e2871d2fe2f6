"""Token sources: a tokenized corpus read as one stream of ids, whatever files hold it.

`len(source)` is the ids it holds and `source[a:b]` a span of them. Readers open their files lazily
and drop the handles when pickled, so a source travels to a Grain worker and reopens there; a worker
reads only the spans it is asked for.

Nothing a reader hands out is unchecked: a committed shard is verified against meta.json's checksum
before its first read on a host (formats.verify_shard), and every span read is checked against the
vocabulary (one vectorised max), so a damaged or mis-tokenized id is refused with its shard and offset
instead of reaching an embedding lookup.
"""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dew.data import formats, ranges, remote
from dew.data.codec import unpack_field
from dew.data.extras import require
from dew.data.pieces import PieceIndex, ends_at

_DEFAULT_DTYPE = np.dtype(np.uint16)


@runtime_checkable
class TokenSource(Protocol):
    """A tokenized corpus as one stream of ids: `len()` ids, `source[a:b]` a span of them.

    eos_id closes a document (None for a corpus written without boundaries); describe() says what the
    source reads by content, which a saved position is compared against.
    """

    eos_id: int | None

    def __len__(self) -> int: ...

    def __getitem__(self, span: slice) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


def _bounds(span: slice, length: int) -> tuple[int, int]:
    if not isinstance(span, slice) or span.step not in (None, 1):
        raise TypeError(f"a token source reads contiguous spans source[a:b], got {span!r}")
    start, stop, _ = span.indices(length)
    return start, max(start, stop)


def spans(source: Any, starts: np.ndarray, length: int) -> np.ndarray:
    """[len(starts), length] ids: source[s:s + length] for each start, through the source's fast path."""
    fast = getattr(source, "spans", None)
    if fast is not None:
        return fast(starts, length)
    out = np.empty((len(starts), length), dtype=source.dtype)
    for row, start in enumerate(np.asarray(starts, dtype=np.int64).tolist()):
        out[row] = source[start : start + length]
    return out


def _outside(ids: np.ndarray, vocab_size: int | None) -> int | None:
    """The flat index of the first id >= vocab_size in `ids`, or None when every id is in the vocabulary."""
    if vocab_size is None or not ids.size or int(ids.max()) < vocab_size:
        return None
    return int(np.argmax(ids.reshape(-1) >= vocab_size))


def _refuse_id(file: str, value: int, offset: int, vocab_size: int) -> ValueError:
    return ValueError(
        f"{file}: id {value} at offset {offset} (ids from the shard's start) is outside the vocabulary "
        f"(vocab_size {vocab_size}); the shard was damaged or written with another tokenizer than meta.json "
        "names: rerun the preprocess job with --overwrite"
    )


def _dtype_from_meta(meta: dict[str, Any] | None, where: str) -> np.dtype:
    if meta is None:
        return _DEFAULT_DTYPE
    value = meta.get("dtype", _DEFAULT_DTYPE.name)
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype not in (np.dtype(np.uint16), np.dtype(np.uint32)):
        raise ValueError(f"{where}: field 'dtype' is {value!r}; a token corpus is uint16 or uint32")
    return dtype


class TokenBytes:
    """Flat token ids in `.bin` files, read through a memmap.

    path is one file, or a committed corpus directory whose `split` shards read as one stream (their
    sizes checked against meta.json now, their checksums when each is first mapped). The dtype and
    vocabulary are meta.json's where there is one, else uint16 (nanoGPT's layout) and unchecked ids.
    eos_id defaults to the corpus's own. A gs:// directory whose shards carry block checksums is read
    by range (dew.data.ranges) instead of through memmaps of whole downloaded shards.
    """

    def __init__(self, path: str, eos_id: int | None = None, *, split: str = "train") -> None:
        self.path = path
        self._ranged: tuple[ranges.RangedShard, ...] | None = None
        if formats.is_directory(path):
            meta = formats.read_meta(path, kind="tokens")
            shards = meta.shards(split)
            if not shards or any(formats.parse_shard_name(s.name)[3] != "bin" for s in shards):
                raise ValueError(f"{path}: split {split!r} is not held in .bin shards")
            # A gs:// shard is fetched into the local cache when a read first needs it, so a start over a
            # remote corpus downloads only the shards it touches; a local shard's size is checked now.
            self._shards: tuple[formats.Shard, ...] | None = shards
            self._directory = path  # where the shards meta.json lists lie
            remote_corpus = remote.is_remote(path)
            self.files = tuple(
                os.path.join(path, s.name) if remote_corpus else formats.verify_shard(path, s) for s in shards
            )
            if remote_corpus and all(ranges.is_ranged(s) for s in shards):
                # Read by range: a batch fetches the blocks its windows lie in (dew.data.ranges).
                self._ranged = tuple(ranges.RangedShard(f, s) for f, s in zip(self.files, shards, strict=True))
            self.dtype = np.dtype(meta.tokens.dtype)
            self.vocab_size: int | None = meta.tokens.vocab_size
            self._fingerprint = meta.fingerprint()
            own_eos = meta.tokens.eos_id
        else:
            if not formats.exists(path):
                raise FileNotFoundError(f"no token file at {path}")
            # One shard of a committed directory, read on its own, is checked like the directory's own.
            single = formats.single_file(path)
            sibling = single.tokens
            where = os.path.join(os.path.dirname(path) or ".", formats.META)
            self.dtype = _dtype_from_meta(sibling, where)
            self.files = (single.local,)
            self._directory = os.path.dirname(path) or "."
            self._shards = None if single.shard is None else (single.shard,)
            self._fingerprint = None
            self.vocab_size = sibling.get("vocab_size") if sibling else None
            own_eos = sibling.get("eos_id") if sibling else None
        self.eos_id = own_eos if eos_id is None else eos_id
        self.split = split
        sizes = []
        for i, file in enumerate(self.files):
            size = self._shards[i].bytes if self._shards else os.path.getsize(file)
            if size % self.dtype.itemsize:
                raise ValueError(
                    f"{file} holds {size} bytes, not a whole number of {self.dtype} ids: the file is truncated "
                    "or its dtype is not the one meta.json records"
                )
            sizes.append(size // self.dtype.itemsize)
        self.ends = np.cumsum(np.array(sizes, dtype=np.int64))
        self._maps: dict[int, np.memmap] = {}
        # Views over the memmaps, by shard and by (shard, span length); they go with the memmaps.
        self._arrays: dict[int, np.ndarray] = {}
        self._spans: dict[tuple[int, int], np.ndarray] = {}

    def __getstate__(self) -> dict[str, Any]:
        # Memmaps, and the views over them, reopen in the worker that unpickles this.
        return {**self.__dict__, "_maps": {}, "_arrays": {}, "_spans": {}}

    def open_handle(self, shard: int = 0) -> np.memmap:
        """A read-only memmap over one file (the only one, for a single .bin), a committed shard's content
        verified first (fetched and checked, or hashed, once per host)."""
        file = self.files[shard]
        if self._shards:
            file = formats.verify_shard(self._directory, self._shards[shard], checksum=True)
        return np.memmap(file, dtype=self.dtype, mode="r")

    def _map(self, shard: int) -> np.memmap:
        if shard not in self._maps:
            self._maps[shard] = self.open_handle(shard)
        return self._maps[shard]

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, span: slice) -> np.ndarray:
        start, stop = _bounds(span, len(self))
        if self._ranged is not None:
            rows = ranges.read_spans(self._ranged, self.ends, self.dtype, np.array([start]), stop - start)
            return self._checked(rows[0], start)
        if len(self.files) == 1:
            return self._checked(self._ids(0)[start:stop], start)
        first = int(np.searchsorted(self.ends, start, side="right"))
        parts, at = [], start
        for shard in range(first, len(self.files)):
            if at >= stop:
                break
            base = int(self.ends[shard - 1]) if shard else 0
            end = min(stop, int(self.ends[shard]))
            parts.append(self._ids(shard)[at - base : end - base])
            at = end
        return self._checked(np.concatenate(parts) if parts else np.zeros(0, dtype=self.dtype), start)

    def _checked(self, ids: np.ndarray, start: int, starts: np.ndarray | None = None) -> np.ndarray:
        """ids as read from offset `start` (or rows read from `starts`), refused if one is outside the vocabulary."""
        at = _outside(ids, self.vocab_size)
        if at is None:
            return ids
        value = int(ids.reshape(-1)[at])
        if starts is not None:
            row, column = divmod(at, ids.shape[1])
            start, at = int(starts[row]), column
        offset = start + at
        shard = int(np.searchsorted(self.ends, offset, side="right"))
        assert self.vocab_size is not None
        raise _refuse_id(self.files[shard], value, offset - self._base(shard), self.vocab_size)

    def spans(self, starts: np.ndarray, length: int) -> np.ndarray:
        starts = np.asarray(starts, dtype=np.int64)
        if not len(starts):
            return np.empty((0, length), dtype=self.dtype)
        # One reduction instead of min and max: a negative start, seen unsigned, is past any length.
        if int(starts.view(np.uint64).max()) > len(self) - length:
            raise IndexError(f"spans of {length} ids from {starts.tolist()} reach outside {len(self)} ids")
        if self._ranged is not None:
            return self._checked(ranges.read_spans(self._ranged, self.ends, self.dtype, starts, length), 0, starts)
        # One fancy index per shard into a window view of its memmap: slicing an np.memmap row by row
        # costs more in its Python __getitem__ than the copy does. Rows that cross shards are joined.
        if len(self.files) == 1:
            return self._checked(self._windows(0, length)[starts], 0, starts)
        shards = np.searchsorted(self.ends, starts, side="right")
        within = shards == np.searchsorted(self.ends, starts + (length - 1), side="right")
        out = np.empty((len(starts), length), dtype=self.dtype)
        for shard in np.unique(shards[within]).tolist():
            rows = np.flatnonzero(within & (shards == shard))
            out[rows] = self._windows(shard, length)[starts[rows] - self._base(shard)]
        for row in np.flatnonzero(~within).tolist():
            out[row] = self[int(starts[row]) : int(starts[row]) + length]
        return self._checked(out, 0, starts)

    def spans_of(self, starts: Sequence[int], lengths: Sequence[int]) -> list[np.ndarray]:
        """self[s : s + n] for each (s, n); over gs:// every piece's blocks are fetched in one read."""
        if self._ranged is None:
            return [self[s : s + n] for s, n in zip(starts, lengths, strict=True)]
        for s, n in zip(starts, lengths, strict=True):
            if not 0 <= s <= s + n <= len(self):
                raise IndexError(f"ids {s}..{s + n} reach outside {len(self)} ids")
        read = ranges.read_pieces(self._ranged, self.ends, self.dtype, starts, lengths)
        return [self._checked(ids, s) for ids, s in zip(read, starts, strict=True)]

    def _base(self, shard: int) -> int:
        return int(self.ends[shard - 1]) if shard else 0

    def _ids(self, shard: int) -> np.ndarray:
        """One shard's ids as a plain array over its memmap: np.memmap's own slicing runs Python per slice,
        which a packed batch, slicing every piece of every window, pays hundreds of times."""
        ids = self._arrays.get(shard)
        if ids is None:
            ids = self._arrays[shard] = self._map(shard).view(np.ndarray)
        return ids

    def _windows(self, shard: int, length: int) -> np.ndarray:
        """Every span of `length` ids of one shard, as a view: [ids - length + 1, length]."""
        view = self._spans.get((shard, length))
        if view is None:  # built once: sliding_window_view's checks cost as much as a batch's copy
            view = self._spans[shard, length] = np.lib.stride_tricks.sliding_window_view(self._ids(shard), length)
        return view

    def describe(self) -> dict[str, Any]:
        if self._fingerprint is not None:
            return {"tokens": "bin", "corpus": self._fingerprint, "split": self.split, "ids": len(self)}
        return {"tokens": "bin", "file": os.path.basename(self.path), "ids": len(self), "dtype": self.dtype.name}


class _Pieces:
    """A stream cut into pieces (row groups, records) with known lengths; spans are read piece by piece."""

    dtype: np.dtype
    eos_id: int | None
    piece_ends: np.ndarray

    def piece(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def _pieces(self, first: int, last: int) -> list[np.ndarray]:
        return [self.piece(i) for i in range(first, last)]

    def __len__(self) -> int:
        return int(self.piece_ends[-1]) if len(self.piece_ends) else 0

    def __getitem__(self, span: slice) -> np.ndarray:
        start, stop = _bounds(span, len(self))
        if start == stop:
            return np.zeros(0, dtype=self.dtype)
        first = int(self.piece_ends.searchsorted(start, side="right"))
        last = int(self.piece_ends.searchsorted(stop - 1, side="right")) + 1
        joined = np.concatenate(self._pieces(first, last))
        base = int(self.piece_ends[first - 1]) if first else 0
        return joined[start - base : stop - base]


def _cast(ids: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > np.iinfo(dtype).max):
        raise ValueError(f"{where}: ids outside 0..{np.iinfo(dtype).max} do not fit dtype {dtype}")
    return ids.astype(dtype, copy=False)


def _verify(paths: Sequence[str], shards: Sequence[formats.Shard] | None) -> None:
    """Checks local committed shards against meta.json's checksums (cached per host; see formats.verify_shard)."""
    if shards is None:
        return
    for path, shard in zip(paths, shards, strict=True):
        formats.verify_shard(os.path.dirname(path), shard, checksum=True)


def _parquet_file(pq: Any, path: str, ranged: Mapping[str, ranges.RangedShard] | None = None) -> Any:
    """pyarrow's ParquetFile over `path` (read by range when `ranged` holds it), its errors (which name
    no file) naming it."""
    try:
        return pq.ParquetFile(ranges.RangedFile(ranged[path]) if ranged and path in ranged else path)
    except formats.DamagedError:
        raise  # a block that failed its checksum, named by shard and block
    except (OSError, ValueError) as error:  # ArrowInvalid is a ValueError, ArrowIOError an OSError
        raise ValueError(f"{path} is not a readable parquet file ({error}); rerun the preprocess job") from None


class TokenColumn(_Pieces):
    """One parquet column of id lists, every row of every file in order, as one stream.

    Spans are read one row group at a time (the last few kept), so a file is never loaded whole.
    column may be omitted for files with a single column. pieces is the row index the preprocess job
    writes ahead (`<split>.pieces.npz`); without it, building the source reads the column once to learn
    each row's id count. shards, meta.json's entries for paths, has each file checked against its
    checksum before it is opened; ids at or above vocab_size are refused as they are read.
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        column: str | None = None,
        dtype: np.dtype = _DEFAULT_DTYPE,
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
        _verify(self.paths, shards)  # every footer is read now, so every file is checked now
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
            cached = _cast(np.asarray(values), self.dtype, f"{path} row group {group} column {self.column!r}")
            at = _outside(cached, self.vocab_size)
            if at is not None:
                assert self.vocab_size is not None
                first = index - group  # the file's first row group: a file's groups are numbered from 0
                offset = self._start(index) - self._start(first) + at
                raise _refuse_id(path, int(cached[at]), offset, self.vocab_size)
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


class TokenRecords(_Pieces):
    """Id arrays in ArrayRecord shards, every record of every file in order, as one stream.

    A record is the ids' raw bytes, or with field set a packed dict of byte arrays holding them under
    field. pieces is the record index the preprocess job writes ahead (`<split>.pieces.npz`); without
    it, building the source reads every record once to learn the lengths. Files open on first read,
    and spans read contiguous record ranges, ArrayRecord's fastest access. shards, meta.json's entries
    for paths, has each file checked against its checksum when it is first opened; ids at or above
    vocab_size are refused as they are read. With `by_record`, the committed gs:// directory whose
    shards paths are (each with a record index), records are read by range (dew.data.record_shards).
    """

    def __init__(
        self,
        paths: Sequence[str],
        *,
        field: str | None = None,
        dtype: np.dtype = _DEFAULT_DTYPE,
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
            count, sizes = self._reader(file).num_records(), []
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
            _verify([path], [self.shards[file]])
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
            at = _outside(np.concatenate(decoded), self.vocab_size)
            if at is not None:
                first = int(self.record_ends[file - 1]) if file else 0
                record_start, file_start = ends_at(self.piece_ends, np.array([first + lo, first])).tolist()
                offset = record_start - file_start + at
                value = int(np.concatenate(decoded)[at])
                raise _refuse_id(path, value, offset, self.vocab_size)
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

"""TokenBytes: a token stream held in `.bin` shards (a committed split, or one nanoGPT-style file), memory-mapped."""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats, locations, ranges, remote, shard_cache
from dew.data.tokens.bin_documents import DocumentPass, check_documents, counting
from dew.data.tokens.sources import (
    bounds,
    dtype_from_meta,
    outside,
    refuse_id,
)


class TokenBytes:
    """Flat token ids in `.bin` files, read through a memmap.

    path is one file, or a committed corpus directory whose `split` shards read as one stream (their
    sizes checked against meta.json now, their checksums and document counts when each is first mapped:
    dew.data.tokens.bin_documents). The dtype and vocabulary are meta.json's where there is one, else
    uint16 (nanoGPT's layout) and unchecked ids.
    eos_id defaults to the corpus's own. A gs:// directory whose shards carry block checksums is read
    by range (dew.data.ranges) instead of through memmaps of whole downloaded shards: every block is
    checked by its crc32c, and no document count is taken, which would fetch the whole shard.

    Args:
        path: A `.bin` file of ids, or a committed corpus directory.
        eos_id: The id that closes a document; by default the corpus's own (None for a bare file).
        split: Which split of a corpus directory to read.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.array([5, 6, 0, 7, 8, 9, 0], dtype=np.uint16).tofile(path)  # two documents, eos 0
        >>> from dew.data import TokenBytes
        >>> tokens = TokenBytes(path, eos_id=0)
        >>> len(tokens), tokens[3:6].tolist()
        (7, [7, 8, 9])
    """

    def __init__(self, path: str, eos_id: int | None = None, *, split: str = "train") -> None:
        self.path = path
        self._hold: object | None = None
        self._ranged: tuple[ranges.RangedShard, ...] | None = None
        self._tokenizer: str | None = None
        if locations.is_directory(path):
            meta = formats.read_meta(path, kind="tokens")
            shards = meta.shards(split)
            if not shards or any(formats.shard_extension(s.name) != "bin" for s in shards):
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
            self._fingerprint: str | None = meta.fingerprint()
            own_eos = meta.tokens.eos_id
            self._tokenizer = meta.tokens.tokenizer
        else:
            if not locations.exists(path):
                raise FileNotFoundError(f"no token file at {path}")
            # One shard of a committed directory, read on its own, is checked like the directory's own.
            single = locations.single_file(path)
            sibling = single.tokens
            where = os.path.join(os.path.dirname(path) or ".", formats.META)
            self.dtype = dtype_from_meta(sibling, where)
            self.files = (single.local,)
            self._hold = single.hold  # a gs:// file's cached copy stays while this source lives
            self._directory = os.path.dirname(path) or "."
            self._shards = None if single.shard is None else (single.shard,)
            self._fingerprint = None
            self.vocab_size = sibling.get("vocab_size") if sibling else None
            own_eos = sibling.get("eos_id") if sibling else None
            self._tokenizer = sibling.get("tokenizer") if sibling else None
        self.eos_id = own_eos if eos_id is None else eos_id
        self._own_eos = own_eos  # what the writer closed each document with, whatever eos a caller reads by
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
        verified first (fetched and checked, or hashed, and its documents counted against meta.json's
        record count, once per host)."""
        file = self.files[shard]
        if not self._shards:
            return np.memmap(file, dtype=self.dtype, mode="r")
        hold = shard_cache.Hold()
        committed = self._shards[shard]
        parsed = formats.parse_shard_name(committed.name)
        split = parsed[0] if parsed else self.split
        counted = counting(self._directory, split, committed, self._own_eos, self._tokenizer)
        remote_copy = remote.is_remote(self._directory)
        # A local shard's documents are counted in its checksum's read; a gs:// shard's in its cached copy.
        also = DocumentPass(self.dtype, counted) if counted is not None and not remote_copy else None
        file = formats.verify_shard(self._directory, committed, checksum=True, holder=hold, also=also)
        mapped = np.memmap(file, dtype=self.dtype, mode="r")
        if remote_copy:
            if counted is not None:
                check_documents(file, mapped.view(np.ndarray), counted)
            # A cached copy stays on disk while the memmap or a view of it lives; the cache may ask for it back.
            shard_cache.pin(file, mapped, close=shard_cache.closer(self, "_let_go", shard))
        return mapped

    def _let_go(self, shard: int) -> None:
        """Drops this source's handles on one shard's memmap; the next read maps it again."""
        self._maps.pop(shard, None)
        self._arrays.pop(shard, None)
        for key in [k for k in self._spans if k[0] == shard]:
            self._spans.pop(key, None)

    def _map(self, shard: int) -> np.memmap:
        if shard not in self._maps:
            self._maps[shard] = self.open_handle(shard)
        return self._maps[shard]

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def __getitem__(self, span: slice) -> np.ndarray:
        start, stop = bounds(span, len(self))
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
        at = outside(ids, self.vocab_size)
        if at is None:
            return ids
        value = int(ids.reshape(-1)[at])
        if starts is not None:
            row, column = divmod(at, ids.shape[1])
            start, at = int(starts[row]), column
        offset = start + at
        shard = int(np.searchsorted(self.ends, offset, side="right"))
        assert self.vocab_size is not None
        raise refuse_id(self.files[shard], value, offset - self._base(shard), self.vocab_size)

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
            # An empty shard (tokenize writes one where a document spans a shard's whole share) holds no
            # bytes to check and none to map: mmap refuses a 0-byte file, so a span across it read nothing.
            empty = int(self.ends[shard]) == self._base(shard)
            ids = np.zeros(0, dtype=self.dtype) if empty else self._map(shard).view(np.ndarray)
            self._arrays[shard] = ids
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

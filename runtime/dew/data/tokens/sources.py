"""Token sources: a tokenized corpus read as one stream of ids, whatever files hold it.

`len(source)` is the ids it holds and `source[a:b]` a span of them. Readers open their files lazily
and drop the handles when pickled, so a source travels to a Grain worker and reopens there; a worker
reads only the spans it is asked for.

Each kind of file has its reader: TokenBytes (`.bin`, token_bytes), TokenColumn (parquet, token_column)
and TokenRecords (ArrayRecord, token_records); this module holds what they share. Nothing a reader
hands out is unchecked: a committed shard is verified against meta.json's checksum
before its first read on a host (formats.verify_shard), and every span read is checked against the
vocabulary (one vectorised max), so a damaged or mis-tokenized id is refused with its shard and offset
instead of reaching an embedding lookup.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np

from dew.data import formats

DEFAULT_DTYPE = np.dtype(np.uint16)


@runtime_checkable
class TokenSource(Protocol):
    """A tokenized corpus as one stream of ids: `len()` ids, `source[a:b]` a span of them.

    eos_id closes a document (None for a corpus written without boundaries); describe() says what the
    source reads by content, which a saved position is compared against.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.array([5, 6, 0, 7, 8, 9, 0], dtype=np.uint16).tofile(path)  # two documents, eos 0
        >>> from dew.data import TokenBytes, TokenSource
        >>> isinstance(TokenBytes(path), TokenSource)
        True
    """

    eos_id: int | None

    def __len__(self) -> int: ...

    def __getitem__(self, span: slice) -> np.ndarray: ...

    def describe(self) -> dict[str, Any]: ...


def bounds(span: slice, length: int) -> tuple[int, int]:
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


def outside(ids: np.ndarray, vocab_size: int | None) -> int | None:
    """The flat index of the first id >= vocab_size in `ids`, or None when every id is in the vocabulary."""
    if vocab_size is None or not ids.size or int(ids.max()) < vocab_size:
        return None
    return int(np.argmax(ids.reshape(-1) >= vocab_size))


def refuse_id(file: str, value: int, offset: int, vocab_size: int) -> ValueError:
    return ValueError(
        f"{file}: id {value} at offset {offset} (ids from the shard's start) is outside the vocabulary "
        f"(vocab_size {vocab_size}); the shard was damaged or written with another tokenizer than meta.json "
        "names: rerun the preprocess job with --overwrite"
    )


def dtype_from_meta(meta: dict[str, Any] | None, where: str) -> np.dtype:
    if meta is None:
        return DEFAULT_DTYPE
    value = meta.get("dtype", DEFAULT_DTYPE.name)
    try:
        dtype = np.dtype(value)
    except TypeError:
        dtype = None
    if dtype not in (np.dtype(np.uint16), np.dtype(np.uint32)):
        raise ValueError(f"{where}: field 'dtype' is {value!r}; a token corpus is uint16 or uint32")
    return dtype


class Pieces:
    """A stream cut into pieces (row groups, records) with known lengths; spans are read piece by piece."""

    dtype: np.dtype
    eos_id: int | None
    piece_ends: np.ndarray
    # Keeps the gs:// files read whole in the local cache while the source lives (dew.data.shard_cache).
    hold: object | None = None

    def piece(self, index: int) -> np.ndarray:
        raise NotImplementedError

    def _pieces(self, first: int, last: int) -> list[np.ndarray]:
        return [self.piece(i) for i in range(first, last)]

    def __len__(self) -> int:
        return int(self.piece_ends[-1]) if len(self.piece_ends) else 0

    def __getitem__(self, span: slice) -> np.ndarray:
        start, stop = bounds(span, len(self))
        if start == stop:
            return np.zeros(0, dtype=self.dtype)
        first = int(self.piece_ends.searchsorted(start, side="right"))
        last = int(self.piece_ends.searchsorted(stop - 1, side="right")) + 1
        joined = np.concatenate(self._pieces(first, last))
        base = int(self.piece_ends[first - 1]) if first else 0
        return joined[start - base : stop - base]


def cast_ids(ids: np.ndarray, dtype: np.dtype, where: str) -> np.ndarray:
    if ids.size and (int(ids.min()) < 0 or int(ids.max()) > np.iinfo(dtype).max):
        raise ValueError(f"{where}: ids outside 0..{np.iinfo(dtype).max} do not fit dtype {dtype}")
    return ids.astype(dtype, copy=False)


def verify_files(paths: Sequence[str], shards: Sequence[formats.Shard] | None) -> None:
    """Checks local committed shards against meta.json's checksums (cached per host; see formats.verify_shard)."""
    if shards is None:
        return
    for path, shard in zip(paths, shards, strict=True):
        formats.verify_shard(os.path.dirname(path), shard, checksum=True)

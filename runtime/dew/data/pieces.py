"""The piece index of a split: where every record (ArrayRecord) or row (parquet) ends, in the kind's unit.

A record-shaped source must know each piece's length before it can map an offset to a piece, and
learning that by reading the shards is O(corpus) at startup. Every writer knows each length as it
writes it and leaves them beside the shards as `<split>.pieces.npz`, stamped with the directory's
fingerprint, whatever kind of record it wrote: lengths count token ids for tokens and record bytes for
packed records (Section.UNIT). A source built from that file reads it in place (dew.data.paged) and opens
nothing but the pieces it reads, so its start costs the same whatever the corpus holds.
Without the file (or with one from another directory) a source scans its shards and builds the same index.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence

import numpy as np

from dew.data import formats, paged

PIECES = "pieces"
_ARRAYS = ("ends", "counts", "field")


@dataclasses.dataclass(frozen=True, eq=False)
class PieceIndex:
    """ends: exclusive end offset (in units) of every piece of every shard, in order; counts: pieces per shard.

    field names what a piece holds: "" for ArrayRecord records that are the ids' raw bytes, the field of
    a packed record, or the parquet column.
    """

    ends: np.ndarray
    counts: np.ndarray
    field: str = ""

    def __post_init__(self) -> None:
        # Checks here cost O(shards), never O(pieces): a loaded index is paged, and a start must not read
        # it whole. That the ends never decrease is checked where an index is made (of_lengths) and saved.
        ends, counts = paged.asanyarray(self.ends), np.asarray(self.counts)  # counts: O(shards)
        if ends.ndim != 1 or counts.ndim != 1:
            raise ValueError("a piece index holds 1-D ends and counts")
        if ends.size and not np.issubdtype(ends.dtype, np.integer):
            raise ValueError(f"piece ends must be integers, got {ends.dtype}")
        if counts.size and not np.issubdtype(counts.dtype, np.integer):
            raise ValueError(f"piece counts must be integers, got {counts.dtype}")
        ends, counts = _int64(ends), _int64(counts)
        if counts.size and int(counts.min()) < 0:
            raise ValueError("a shard cannot hold a negative number of pieces")
        if int(counts.sum()) != ends.size:
            raise ValueError(f"the shards' piece counts add up to {int(counts.sum())}, but {ends.size} ends are given")
        if ends.size and int(ends[0]) < 0:
            raise ValueError("piece ends must start at or after 0")
        object.__setattr__(self, "ends", ends)
        object.__setattr__(self, "counts", counts)

    @classmethod
    def of_lengths(cls, lengths: Sequence[np.ndarray], field: str = "") -> PieceIndex:
        """The index of shards whose pieces have these lengths, shard by shard."""
        flat = [np.asarray(x, dtype=np.int64) for x in lengths]
        joined = np.concatenate(flat) if flat else np.zeros(0, dtype=np.int64)
        if joined.size and int(joined.min()) < 0:
            raise ValueError(f"piece {int(np.argmin(joined))} has negative length {int(joined.min())}")
        counts = np.array([len(x) for x in flat], dtype=np.int64)
        return cls(ends=np.cumsum(joined, dtype=np.int64), counts=counts, field=field)

    def __eq__(self, other: object) -> bool:
        if not isinstance(other, PieceIndex):
            return NotImplemented
        return (
            self.field == other.field
            and np.array_equal(self.ends, other.ends)
            and np.array_equal(self.counts, other.counts)
        )

    __hash__ = None  # type: ignore[assignment]  # equality is by content of mutable arrays

    @property
    def shard_piece_ends(self) -> np.ndarray:
        """Global piece count at the end of each shard."""
        return np.cumsum(self.counts, dtype=np.int64)

    @property
    def shard_ends(self) -> np.ndarray:
        """Units in the stream up to the end of each shard."""
        return ends_at(self.ends, self.shard_piece_ends)

    def save(self, path: str, fingerprint: str) -> None:
        """Writes the index stamped with the fingerprint of the corpus it describes, atomically.

        Refuses ends that decrease: readers map the file and trust its order without scanning it.
        """
        if self.ends.size > 1 and bool(np.any(self.ends[1:] < self.ends[:-1])):
            raise ValueError("piece ends must never decrease")
        arrays = {"ends": self.ends, "counts": self.counts, "field": np.array(self.field)}
        formats.save_derived(path, fingerprint, arrays)

    @classmethod
    def load(cls, path: str, fingerprint: str) -> PieceIndex | None:
        """The index in `path` if it exists and describes this corpus; None otherwise.

        A file that is there but cannot be read as an index is refused: it would otherwise hide a
        broken corpus directory behind a slow start.
        """
        arrays = formats.load_derived(path, fingerprint, _ARRAYS)
        if arrays is None:
            return None
        try:
            return cls(ends=arrays["ends"], counts=arrays["counts"], field=str(arrays["field"]))
        except ValueError as error:
            raise ValueError(
                f"{path} is not a readable piece index ({error}); delete it and the runtime computes the index "
                "from the shards, or rerun the preprocess job to rewrite it"
            ) from None


def ends_at(ends: np.ndarray, counts: np.ndarray) -> np.ndarray:
    """ends[counts - 1], with 0 where a count is 0: where the first `counts` pieces end, reading only those."""
    counts = np.asarray(counts, dtype=np.int64)
    out = np.zeros(counts.shape, dtype=np.int64)
    some = counts > 0
    out[some] = ends[counts[some] - 1]
    return out


def _int64(array: np.ndarray) -> np.ndarray:
    """The array as int64; a paged int64 array stays itself, where np.asarray would read it whole."""
    return array if array.dtype == np.int64 else array.astype(np.int64)


def offline_pieces(directory: str, meta: formats.Meta, split: str, field: str | None) -> PieceIndex | None:
    """The offline piece index of `split` when one describes these shards as read with `field`; else None.

    field None accepts the index whatever it holds (the file's own column); a field the index was not
    written for means the caller reads other bytes, so the index does not apply. An index that
    disagrees with meta.json's per-shard record and unit counts is refused by name.
    """
    path = formats.derived_path(directory, split, PIECES)
    index = PieceIndex.load(path, meta.fingerprint())
    if index is None or (field is not None and field != index.field):
        return None
    shards = meta.shards(split)
    counts = np.array([s.records for s in shards], dtype=np.int64)
    units = np.cumsum([s.units for s in shards], dtype=np.int64)
    if not np.array_equal(index.counts, counts) or not np.array_equal(index.shard_ends, units):
        pairs = zip(shards, index.counts, counts, index.shard_ends, units, strict=False)  # the index may list others
        unlike = [shard.name for shard, a, b, c, d in pairs if a != b or c != d]
        raise formats.DamagedError(
            f"{path} disagrees with {formats.META} on the records or units of split {split!r}'s shard "
            f"{unlike[0] if unlike else shards[-1].name}; delete it "
            "and the runtime computes the index from the shards, or rerun the preprocess job to rewrite it"
        )
    return index

"""Where every token goes: the train/val cut, the shards of each split, and which shard a document lands in.

The corpus is the tokenized documents in (file index, row) order. The val split is the last
`val_fraction` of its tokens, cut at that exact token, so one document can be split in two. Within a
split, shard j starts at the first document that starts at or after j / shards of the split's tokens;
shards break between documents. All of this is computed from document lengths alone, in three small
steps that never gather the corpus in one place:

1. per file, the lengths of its documents by row (`FileLengths`), 16 bytes a document;
2. the file totals, combined into one `Layout` (a few numbers per file);
3. per file again, the keys at which the cut and the shard boundaries fall (`ShardMap`), one per shard.
"""

from __future__ import annotations

import bisect
import dataclasses
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import numpy as np

from dew.preprocess.shards import sized_count

TRAIN = "train"
VAL = "val"
Key = tuple[int, int]  # (file index, row)
ShardId = tuple[str, int]  # (split, shard index)
_AFTER_ALL = (1 << 62, -1)  # a key after every document


@dataclasses.dataclass(frozen=True, eq=False)
class FileLengths:
    """The token count of every document of one file, rows ascending (zero-length documents included)."""

    file: int
    rows: np.ndarray
    lengths: np.ndarray

    @classmethod
    def of(cls, file: int, pairs: Iterable[tuple[int, int]]) -> FileLengths:
        table = np.array(sorted(pairs), dtype=np.int64).reshape(-1, 2)
        return cls(file=file, rows=table[:, 0], lengths=table[:, 1])

    @classmethod
    def of_parts(cls, file: int, parts: Iterable[tuple[np.ndarray, np.ndarray]]) -> FileLengths:
        """From (rows, lengths) array pairs, one per batch of the file's documents, in any order."""
        parts = list(parts)
        rows = np.concatenate([np.asarray(r, dtype=np.int64) for r, _ in parts]) if parts else np.zeros(0, np.int64)
        lengths = np.concatenate([np.asarray(n, dtype=np.int64) for _, n in parts]) if parts else np.zeros(0, np.int64)
        order = np.argsort(rows, kind="stable")
        return cls(file=file, rows=rows[order], lengths=lengths[order])

    def summary(self) -> tuple[int, int, int, int, int]:
        """(file, tokens, documents with tokens, documents without, the first row without or -1)."""
        without = self.rows[self.lengths == 0]
        first = int(without[0]) if without.size else -1
        return self.file, int(self.lengths.sum()), len(self.lengths) - len(without), len(without), first


@dataclasses.dataclass(frozen=True, kw_only=True)
class Layout:
    """The corpus at the scale of files: where each file starts, the cut, and each split's shard count."""

    file_starts: Mapping[int, int]
    tokens: int
    documents: int
    empty_documents: int
    first_empty: Key | None = None  # the first document without tokens, an example for stats.json
    cut: int
    shards: Mapping[str, int]

    @classmethod
    def plan(
        cls,
        summaries: Iterable[tuple[int, int, int, int, int]],
        *,
        val_fraction: float,
        itemsize: int,
        shard_bytes: int,
        num_shards: int | None = None,
    ) -> Layout:
        ordered = sorted(summaries)
        starts: dict[int, int] = {}
        position = documents = empty = 0
        first_empty: Key | None = None
        for file, tokens, full, none, first in ordered:
            starts[file] = position
            position += tokens
            documents += full
            empty += none
            if first_empty is None and first >= 0:
                first_empty = (file, first)
        val = int(position * val_fraction)
        cut = position - val
        shards = {TRAIN: num_shards or sized_count(TRAIN, cut * itemsize, shard_bytes)}
        if val:
            shards[VAL] = sized_count(VAL, val * itemsize, shard_bytes)
        return cls(
            file_starts=starts,
            tokens=position,
            documents=documents,
            empty_documents=empty,
            first_empty=first_empty,
            cut=cut,
            shards=shards,
        )

    def split_range(self, split: str) -> tuple[int, int]:
        return (0, self.cut) if split == TRAIN else (self.cut, self.tokens)

    def boundaries(self) -> Iterator[tuple[str, int, int]]:
        """(split, shard j, the token offset shard j should start at) for every shard but each split's first."""
        for split, count in self.shards.items():
            start, stop = self.split_range(split)
            for j in range(1, count):
                yield split, j, start + (stop - start) * j // count


def locate(lengths: FileLengths, layout: Layout) -> Iterator[tuple[str | ShardId, Any]]:
    """The cut and shard boundaries that fall inside this file, as keys ("cut", (key, k)) / ((split, j), key)."""
    start = layout.file_starts.get(lengths.file)
    if start is None:
        return
    keep = lengths.lengths > 0
    rows, sizes = lengths.rows[keep], lengths.lengths[keep]
    ends = start + np.cumsum(sizes)
    begins = ends - sizes
    stop = int(ends[-1]) if len(ends) else start
    if start <= layout.cut < stop:
        i = int(np.searchsorted(ends, layout.cut, side="right"))
        yield "cut", ((lengths.file, int(rows[i])), layout.cut - int(begins[i]))
    for split, j, offset in layout.boundaries():
        if start <= offset < stop:
            i = int(np.searchsorted(begins, offset, side="left"))
            # No document of this file starts at or after the offset: the shard starts with the next file.
            key = (lengths.file, int(rows[i])) if i < len(rows) else (lengths.file + 1, -1)
            yield (split, j), key


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardMap:
    """Routes each document (or the two pieces of the one the cut falls in) to its shard."""

    layout: Layout
    cut: tuple[Key, int] | None
    bounds: Mapping[str, Sequence[Key]]

    @classmethod
    def of(cls, layout: Layout, located: Iterable[tuple[str | ShardId, Any]]) -> ShardMap:
        cut = None
        found: dict[ShardId, Key] = {}
        for name, value in located:
            if isinstance(name, str):  # "cut": shard boundaries are named (split, j)
                cut = value
            else:
                found[name] = tuple(value)
        bounds = {}
        for split, count in layout.shards.items():
            keys = []
            for j in range(1, count):
                # An offset past every token (a split emptier than its shards) starts a shard after them all.
                keys.append(found.get((split, j), _AFTER_ALL))
            bounds[split] = keys
        return cls(layout=layout, cut=cut, bounds=bounds)

    def assign(self, key: Key, ids: np.ndarray) -> Iterator[tuple[ShardId, tuple[Key, np.ndarray]]]:
        if len(ids) == 0:
            return
        key = tuple(key)  # type: ignore[assignment]
        if VAL not in self.layout.shards or self.cut is None:
            yield self._route(TRAIN, key, ids)
            return
        cut_key, k = self.cut
        if key < tuple(cut_key):
            yield self._route(TRAIN, key, ids)
        elif key == tuple(cut_key) and k > 0:
            yield self._route(TRAIN, key, ids[:k])
            yield self._route(VAL, key, ids[k:])
        else:
            yield self._route(VAL, key, ids)

    def _route(self, split: str, key: Key, ids: np.ndarray) -> tuple[ShardId, tuple[Key, np.ndarray]]:
        return (split, bisect.bisect_right(self.bounds[split], key)), (key, ids)

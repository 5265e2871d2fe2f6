"""One batch of packed windows, laid out from a PackingPlan: the one place windows are filled.

Two kinds pack: PackedTokens (pretraining documents, through tokens.documents.PackedWindowSource)
and ChatMessages (rendered conversations, through chat.ChatWindows). Both number the pieces of a
window 1, 2, … in text_segment_ids with 0 on padding, and both put padding at position 0. Where a
piece cut from a longer document counts its positions from is a choice:

- "document" (both kinds' default): positions continue through the document, so a token keeps its
  place in its document or conversation, which is where it stands when the model reads that text whole.
- "piece": positions restart at 0 in every piece, PackedTokens(positions="piece"), for a model whose
  learned position table ends at the window: continued positions of a long document's later pieces
  would index past it.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Callable
from typing import Literal, Protocol

import numpy as np

from dew.data.packing import PackingPlan

Positions = Literal["piece", "document"]


class Spans(Protocol):
    """What a batch slices its pieces from: an array, or a token stream read in spans (a TokenSource)."""

    def __getitem__(self, span: slice, /) -> np.ndarray: ...


@dataclasses.dataclass(frozen=True, eq=False)
class PackedBatch:
    """Where every piece of a batch of plan windows comes from and lands, in window order.

    segment_ids and positions are the batch's own [windows, window] int32 arrays; `copy` and
    `gather` fill any further column the same way. Every fill is one slice per piece: pieces are
    few and long next to tokens, so that beats any per-token index arithmetic.
    """

    shape: tuple[int, int]
    rows: list[int]
    columns: list[int]
    documents: np.ndarray
    starts: np.ndarray
    lengths: list[int]
    segment_ids: np.ndarray
    positions: np.ndarray

    def gather(self, values: np.ndarray, document_starts: np.ndarray, *, fill: int = 0) -> np.ndarray:
        """[windows, window] int32 of a ragged column whose document d begins at
        values[document_starts[d]]; `fill` in every cell no piece reaches."""
        return self.slice(values, document_starts[self.documents], fill=fill)

    def slice(self, values: Spans, origins: np.ndarray, *, fill: int = 0) -> np.ndarray:
        """[windows, window] int32 of a stream in which each piece's document begins at its `origins`
        entry; `fill` in every cell no piece reaches."""
        sources = (np.asarray(origins, dtype=np.int64) + self.starts).tolist()
        many = getattr(values, "spans_of", None)  # a stream that reads many spans at once (gs:// by range)
        if many is not None:
            parts = many(sources, self.lengths)
            return self._fill(lambda piece: parts[piece], fill)
        return self._fill(lambda piece: values[sources[piece] : sources[piece] + self.lengths[piece]], fill)

    def copy(self, read: Callable[[int, int, int], np.ndarray], *, fill: int = 0) -> np.ndarray:
        """[windows, window] int32 from read(document, start, length) per piece, for sources read as
        spans; `fill` in every cell no piece reaches."""
        documents, starts = self.documents.tolist(), self.starts.tolist()
        return self._fill(lambda piece: read(documents[piece], starts[piece], self.lengths[piece]), fill)

    def _fill(self, piece_values: Callable[[int], np.ndarray], fill: int) -> np.ndarray:
        out = np.full(self.shape, fill, dtype=np.int32)
        for piece, (row, column, length) in enumerate(zip(self.rows, self.columns, self.lengths, strict=True)):
            out[row, column : column + length] = piece_values(piece)
        return out


def packed_batch(plan: PackingPlan, windows: np.ndarray, *, positions: Positions) -> PackedBatch:
    """The layout of plan windows `windows` as one batch, counting positions per `positions` (see the
    module docstring for which use wants which)."""
    if positions not in ("piece", "document"):
        raise ValueError(f"positions count per 'piece' or per 'document', got {positions!r}")
    windows = np.asarray(windows, dtype=np.int64)
    # One gather of both bounds: an index read in place (dew.data.paged) reads each window's pair at once.
    first, last = plan.offsets[np.stack([windows, windows + 1])]
    counts = last - first
    window_first = np.cumsum(counts) - counts  # each window's first piece, in batch order
    rank = np.arange(int(counts.sum())) - np.repeat(window_first, counts)
    pieces = np.repeat(first, counts) + rank
    lengths = plan.lengths[pieces]
    # A piece starts in its window after the pieces placed there before it.
    before = np.cumsum(lengths) - lengths
    columns = before - np.repeat(before[window_first], counts)
    starts = plan.starts[pieces]
    batch = PackedBatch(
        shape=(len(windows), plan.window),
        rows=np.repeat(np.arange(len(windows)), counts).tolist(),
        columns=columns.tolist(),
        documents=plan.documents[pieces],
        starts=starts,
        lengths=lengths.tolist(),
        segment_ids=np.zeros((len(windows), plan.window), dtype=np.int32),
        positions=np.zeros((len(windows), plan.window), dtype=np.int32),
    )
    count_up = np.arange(plan.window, dtype=np.int32)
    origins = starts.tolist() if positions == "document" else [0] * len(batch.lengths)
    for row, column, length, segment, origin in zip(
        batch.rows, batch.columns, batch.lengths, (rank + 1).tolist(), origins, strict=True
    ):
        cells = slice(column, column + length)
        batch.segment_ids[row, cells] = segment
        batch.positions[row, cells] = count_up[:length] + origin
    return batch

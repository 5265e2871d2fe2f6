"""Documents over a token stream, and windows packed from them by a PackingPlan."""

from __future__ import annotations

from typing import Any

import numpy as np

from dew.data import paged
from dew.data.packed_batch import PackedBatch, Positions, packed_batch
from dew.data.packing import PackingPlan, document_ends, lengths_of
from dew.data.pieces import ends_at
from dew.data.records import BatchRecords, describe_source
from dew.data.tokens.sources import TokenSource


class TokenDocumentSource:
    """Record i is document i of a token stream: the ids after the previous eos through its own.

    The tail after the last eos is a document too, and a stream without eos is one document. eos_id
    defaults to the stream's own. Finding the boundaries reads the stream once, unless `ends` (an
    offline document index, exclusive end offsets) is handed over.

    Args:
        tokens: The id stream.
        eos_id: The id that ends a document; by default the stream's own.
        ends: Each document's exclusive end offset, when an index holds them already.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.array([5, 6, 0, 7, 8, 9, 0], dtype=np.uint16).tofile(path)  # two documents, eos 0
        >>> from dew.data import TokenBytes, TokenDocumentSource
        >>> documents = TokenDocumentSource(TokenBytes(path), eos_id=0)
        >>> len(documents), documents[1].tolist()
        (2, [7, 8, 9, 0])
    """

    def __init__(self, tokens: TokenSource, eos_id: int | None = None, *, ends: np.ndarray | None = None) -> None:
        self.tokens = tokens
        self.eos_id = tokens.eos_id if eos_id is None else eos_id
        if ends is None:
            ends = document_ends(len(tokens), lambda a, b: tokens[a:b], self.eos_id)
        ends = paged.asanyarray(ends)
        # An offline index is paged: np.asarray would read it whole, and a copy would cost O(documents).
        self.ends = ends if ends.dtype == np.int64 else ends.astype(np.int64)
        if len(self.ends) and int(self.ends[-1]) != len(tokens):
            raise ValueError(
                f"the document index ends at id {int(self.ends[-1])} but the stream holds {len(tokens)}: "
                "it was derived from another corpus"
            )

    @property
    def lengths(self) -> np.ndarray:
        """Every document's length: O(documents), for planning, never for reading."""
        return lengths_of(self.ends)

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, index: int) -> np.ndarray:
        start = int(self.ends[index - 1]) if index else 0
        return self.tokens[start : int(self.ends[index])]

    def describe(self) -> dict[str, Any]:
        return {"documents": len(self), "eos_id": self.eos_id, "tokens": describe_source(self.tokens)}


class PackedWindowSource(BatchRecords):
    """Record w is window w of a packing plan over documents, as three int32 arrays of `plan.window`.

    text holds the pieces back to back and zeros after them; text_segment_ids numbers the pieces
    1, 2, … with 0 for padding; text_positions is each token's position inside its document, continuing
    through the pieces of one cut across windows, or with positions="piece" counting from 0 in each
    piece (dew.data.packed_batch says which use wants which).
    `documents` is a TokenDocumentSource, or any records whose record d is document d's ids.
    first and count select a run of windows (a held-out tail, say).

    Args:
        documents: The documents the plan was made over, by index.
        plan: Which document pieces fill each window (dew.data.packing.plan_packing).
        first: The plan's first window this source reads.
        count: How many windows it reads; by default every one from `first` on.
        positions: "document" to count positions through a document's pieces, "piece" from 0 in each.

    Examples:
        >>> import numpy as np
        >>> from dew.data import PackedWindows
        >>> from dew.data.packing import plan_packing
        >>> documents = [np.array([5, 6, 0]), np.array([7, 8, 9, 1, 2, 0]), np.array([3, 0])]
        >>> plan = plan_packing(np.array([len(d) for d in documents]), window=6, bins=2)
        >>> windows = PackedWindows(documents, plan)
        >>> batch = windows.read_batch(np.array([1]))  # the short documents share a window
        >>> batch["text"].tolist(), batch["text_segment_ids"].tolist()
        ([[5, 6, 0, 3, 0, 0]], [[1, 1, 1, 2, 2, 0]])
    """

    def __init__(
        self,
        documents: Any,
        plan: PackingPlan,
        *,
        first: int = 0,
        count: int | None = None,
        positions: Positions = "document",
    ) -> None:
        self.documents, self.plan, self.first, self.positions = documents, plan, first, positions
        self.count = len(plan) - first if count is None else count
        if first < 0 or self.count < 0 or first + self.count > len(plan):
            raise ValueError(f"windows {first}..{first + self.count} are outside the plan's {len(plan)} windows")

    def tokens_in(self, indices: np.ndarray) -> np.ndarray:
        """Real tokens (padding excluded) in each of these windows."""
        windows = np.asarray(indices, dtype=np.int64) + self.first
        if not windows.size:
            return np.zeros(0, dtype=np.int64)
        # Reads these windows' pieces only: a table over the whole plan would cost O(windows) at first use.
        first, last = self.plan.offsets[np.stack([windows, windows + 1])]
        counts = last - first
        at = np.cumsum(counts) - counts  # where each window's pieces begin among those gathered
        pieces = np.repeat(first - at, counts) + np.arange(int(counts.sum()))
        return np.add.reduceat(self.plan.lengths[pieces], at)

    def __len__(self) -> int:
        return self.count

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.count):
            raise IndexError(f"window {int(indices.max())} is outside this {self.count}-window source")
        batch = packed_batch(self.plan, indices + self.first, positions=self.positions)
        return {
            "text": self._text(batch),
            "text_segment_ids": batch.segment_ids,
            "text_positions": batch.positions,
        }

    def _text(self, batch: PackedBatch) -> np.ndarray:
        """The batch's ids: slices of the token stream when the documents are a TokenDocumentSource
        (the pieces' document starts looked up in one gather), else slices of each document record."""
        documents = self.documents
        if isinstance(documents, TokenDocumentSource):
            return batch.slice(documents.tokens, ends_at(documents.ends, batch.documents))
        return batch.copy(lambda document, start, length: np.asarray(documents[document])[start : start + length])

    def describe(self) -> dict[str, Any]:
        return {
            "packed": [self.plan.window, self.plan.bins],
            "first": self.first,
            "count": self.count,
            "documents": describe_source(self.documents),
        }


# The reference page's name for the packed-window records (the plan over the whole corpus in file order).
PackedWindows = PackedWindowSource

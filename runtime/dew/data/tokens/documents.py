"""Documents over a token stream, and windows packed from them by a PackingPlan."""

from __future__ import annotations

from collections.abc import Callable
from typing import Any

import numpy as np

from dew.data.packed_batch import packed_batch
from dew.data.packing import PackingPlan, document_ends
from dew.data.records import BatchRecords, describe_source
from dew.data.tokens.sources import TokenSource


class TokenDocumentSource:
    """Record i is document i of a token stream: the ids after the previous eos through its own.

    The tail after the last eos is a document too, and a stream without eos is one document. eos_id
    defaults to the stream's own. Finding the boundaries reads the stream once, unless `ends` (an
    offline document index, exclusive end offsets) is handed over.
    """

    def __init__(self, tokens: TokenSource, eos_id: int | None = None, *, ends: np.ndarray | None = None) -> None:
        self.tokens = tokens
        self.eos_id = tokens.eos_id if eos_id is None else eos_id
        if ends is None:
            ends = document_ends(len(tokens), lambda a, b: tokens[a:b], self.eos_id)
        self.ends = np.asarray(ends, dtype=np.int64)
        if len(self.ends) and int(self.ends[-1]) != len(tokens):
            raise ValueError(
                f"the document index ends at id {int(self.ends[-1])} but the stream holds {len(tokens)}: "
                "it was derived from another corpus"
            )
        self.starts = np.concatenate([[0], self.ends[:-1]]).astype(np.int64) if len(self.ends) else self.ends

    @property
    def lengths(self) -> np.ndarray:
        return self.ends - self.starts

    def __len__(self) -> int:
        return len(self.ends)

    def __getitem__(self, index: int) -> np.ndarray:
        return self.tokens[int(self.starts[index]) : int(self.ends[index])]

    def describe(self) -> dict[str, Any]:
        return {"documents": len(self), "eos_id": self.eos_id, "tokens": describe_source(self.tokens)}


class PackedWindowSource(BatchRecords):
    """Record w is window w of a packing plan over documents, as three int32 arrays of `plan.window`.

    text holds the pieces back to back and zeros after them; text_segment_ids numbers the pieces
    1, 2, … with 0 for padding; text_positions counts from 0 within each piece, a chunk of a long
    document included (dew.data.packed_batch says why).
    `documents` is a TokenDocumentSource, or any records whose record d is document d's ids.
    first and count select a run of windows (a held-out tail, say).
    """

    def __init__(self, documents: Any, plan: PackingPlan, *, first: int = 0, count: int | None = None) -> None:
        self.documents, self.plan, self.first = documents, plan, first
        self.count = len(plan) - first if count is None else count
        if first < 0 or self.count < 0 or first + self.count > len(plan):
            raise ValueError(f"windows {first}..{first + self.count} are outside the plan's {len(plan)} windows")
        self._filled: np.ndarray | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_filled": None}  # derived from the plan; rebuilt where it is needed

    def tokens_in(self, indices: np.ndarray) -> np.ndarray:
        """Real tokens (padding excluded) in each of these windows."""
        if self._filled is None:
            plan = self.plan
            self._filled = np.add.reduceat(plan.lengths, plan.offsets[:-1]) if len(plan) else np.zeros(0, np.int64)
        return self._filled[np.asarray(indices, dtype=np.int64) + self.first]

    def __len__(self) -> int:
        return self.count

    def read_batch(self, indices: np.ndarray) -> dict[str, np.ndarray]:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.count):
            raise IndexError(f"window {int(indices.max())} is outside this {self.count}-window source")
        batch = packed_batch(self.plan, indices + self.first, positions="piece")
        return {
            "text": batch.copy(self._span_reader()),
            "text_segment_ids": batch.segment_ids,
            "text_positions": batch.positions,
        }

    def _span_reader(self) -> Callable[[int, int, int], np.ndarray]:
        """read(document, start, length) for this source's documents: one slice of the token stream
        when they are a TokenDocumentSource, else a slice of the document record."""
        documents = self.documents
        if hasattr(documents, "starts") and hasattr(documents, "tokens"):
            tokens, firsts = documents.tokens, documents.starts

            def span(document: int, start: int, length: int) -> np.ndarray:
                origin = int(firsts[document]) + start
                return tokens[origin : origin + length]

            return span
        return lambda document, start, length: np.asarray(documents[document])[start : start + length]

    def describe(self) -> dict[str, Any]:
        return {
            "packed": [self.plan.window, self.plan.bins],
            "first": self.first,
            "count": self.count,
            "documents": describe_source(self.documents),
        }

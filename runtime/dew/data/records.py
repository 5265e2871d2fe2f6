"""Record sources read by index, and reading them a batch at a time.

A source is anything with `len()` and `source[i]` (a grain MapDataset or RandomAccessDataSource, a
list). Reading record by record in Python dominates loader cost, so a source may also offer
`read_batch(indices)` returning the stacked batch directly, or grain's `__getitems__`; the stream
uses the fastest one the source has.
"""

from __future__ import annotations

import json
from collections.abc import Mapping, Sequence
from typing import Any, Protocol, runtime_checkable

import numpy as np


@runtime_checkable
class Records(Protocol):
    """Records by index: `len(records)` of them, `records[i]` the ith.

    Examples:
        >>> from dew.data import Records
        >>> isinstance(["a", "b"], Records)  # a list is records
        True
    """

    def __len__(self) -> int: ...

    def __getitem__(self, index: int) -> Any: ...


class BatchRecords:
    """A source whose one real read is `read_batch`: a record alone is row 0 of a batch of one, so
    the two reads cannot disagree."""

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        raise NotImplementedError

    def __getitem__(self, index: int) -> dict[str, Any]:
        return {key: value[0] for key, value in self.read_batch(np.array([index])).items()}


def read_batch(source: Any, indices: np.ndarray) -> Any:
    """The records at `indices`, stacked into one batch, through the source's fastest read."""
    fast = getattr(source, "read_batch", None)
    if fast is not None:
        return fast(indices)
    many = getattr(source, "__getitems__", None)
    records = many([int(i) for i in indices]) if many is not None else [source[int(i)] for i in indices]
    return collate(records)


def collate(records: Sequence[Any]) -> Any:
    """Stacks a list of records: dicts key by key, arrays and numbers into one array, text into a list."""
    if not records:
        raise ValueError("cannot collate an empty batch")
    first = records[0]
    if isinstance(first, Mapping):
        missing = [i for i, r in enumerate(records) if not isinstance(r, Mapping) or r.keys() != first.keys()]
        if missing:
            raise ValueError(f"record {missing[0]} of the batch has keys unlike record 0's {sorted(first)}")
        return {key: collate([r[key] for r in records]) for key in first}
    if isinstance(first, str | bytes):
        return list(records)
    return np.stack([np.asarray(r) for r in records])


def describe_source(source: Any) -> dict[str, Any]:
    """What a source reads, by content rather than address, for comparing saved positions."""
    own = getattr(source, "describe", None)
    if callable(own):
        description = own()
        json.dumps(description, default=str)  # must be JSON-able
        return dict(description)
    return {"type": type(source).__name__, "records": len(source)}

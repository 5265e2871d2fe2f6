"""A share's own Grain pipeline, batched where it is: its position is Grain's state for that share.

What Dataset.from_grain builds from a function partition -> IterDataset, and what a streamed HF
dataset reads through; every indexed spec trains on the global stream (dew.data.stream) instead.
"""

from __future__ import annotations

import dataclasses
import weakref
from collections.abc import Callable, Iterator, Mapping
from typing import TYPE_CHECKING, Any

from dew.data import position, workers
from dew.data.loading import Loading
from dew.data.partition import DataPartition
from dew.data.stream import Started

if TYPE_CHECKING:
    import grain


class ShareStream:
    """A share's own Grain iterator, batched where it is; its position is Grain's state for that share."""

    def __init__(
        self,
        iterator: grain.DatasetIterator,
        partition: DataPartition,
        reads: Mapping[str, Any],
        *,
        from_workers: bool = False,
        endless: bool = False,
    ):
        self.partition, self.reads = partition, dict(reads)
        # A caller's training pipeline that runs dry ends the stream (on a pod, every reader of every share
        # at the same step: dew.data.distributed), saying which share ended and after how many batches.
        self.endless, self._batches = endless, 0
        # Grain's close waits out what its iterator started, so there are no reads of ours to wait for.
        self._started = Started(iterator, from_workers=from_workers, rows=None, stop_seconds=0.0)
        self._finalizer = weakref.finalize(self, self._started.close)

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        try:
            batch = next(self._started)
        except StopIteration:
            if not self.endless:
                raise
            share = f"share {self.partition.index} of {self.partition.count}"
            raise StopIteration(
                f"the training pipeline of {share} ended after {self._batches} batches; for an endless "
                "stream, repeat its records before they become the share's IterDataset "
                "(MapDataset.repeat() before to_iter_dataset()), or hand over the MapDataset itself"
            ) from None
        self._batches += 1
        return batch

    @property
    def _iterator(self) -> grain.DatasetIterator:
        if self._started.iterator is None:
            raise RuntimeError("this data iterator is closed")
        return self._started.iterator

    def get_state(self) -> position.Position:
        state = self._iterator.get_state()
        return position.SharePosition(self.partition.index, self.partition.count, self.reads, state).to_state()

    def set_state(self, state: Mapping[str, Any]) -> None:
        saved = position.parse(state)
        if isinstance(saved, position.GlobalPosition):
            raise ValueError(
                "this stream batches its own share and keeps grain's state for it; a global record "
                f"count ({saved.records} records of {position.describe(saved.reads)}) cannot place it"
            )
        if (saved.index, saved.count) != (self.partition.index, self.partition.count):
            raise ValueError(
                f"the saved position belongs to share {saved.index} of {saved.count}, this reader is share "
                f"{self.partition.index} of {self.partition.count}; a share's own state resumes only there"
            )
        if dict(saved.reads) != self.reads:
            raise ValueError(
                f"the saved position reads {position.describe(saved.reads)}, "
                f"this stream reads {position.describe(self.reads)}"
            )
        self._iterator.set_state(dict(saved.state))

    def close(self) -> None:
        self._finalizer()

    def __enter__(self) -> ShareStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class ShareReader:
    """Opens a share's own pipeline: `build(partition)` gives the IterDataset of that share's records."""

    build: Callable[[DataPartition], grain.IterDataset]
    batch: int
    loading: Loading
    reads: Mapping[str, Any]
    # A training reader: a pipeline that ends says so as it ends the stream.
    endless: bool = False

    def __repr__(self) -> str:
        return f"ShareReader(batch={self.batch}, workers={self.loading.workers}, reads={position.describe(self.reads)})"

    def __call__(self, partition: DataPartition | None = None) -> ShareStream:
        partition = partition or DataPartition()
        ds = self.build(partition).batch(partition.rows(self.batch), drop_remainder=True)
        if self.loading.workers:
            ds = workers.prefetch(ds, self.loading)
        return ShareStream(iter(ds), partition, self.reads, from_workers=self.loading.workers > 0, endless=self.endless)

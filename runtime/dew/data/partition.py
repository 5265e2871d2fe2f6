"""Which share of every global batch one process reads."""

from __future__ import annotations

import dataclasses

from dew.data import validate


@dataclasses.dataclass(frozen=True, kw_only=False)
class DataPartition:
    """The `index`th of `count` equal, disjoint shares of every global batch.

    A reader takes records index, index + count, index + 2·count, … of each global batch, so the shares
    of one step together hold the same records at every count and a global record count is a place in
    the stream whatever the count. `readers` processes read the same share (devices that split a
    sequence or hold pipeline stages rather than rows); `reader` is which of them this one is.

    Args:
        index: Which share this process reads, 0 <= index < count.
        count: How many equal shares a global batch is cut into (usually the data-parallel width).
        readers: Processes that read the same share (sequence or pipeline parallelism).
        reader: Which of those `readers` this process is.

    Examples:
        >>> from dew.data import DataPartition
        >>> DataPartition(index=1, count=4)
        DataPartition(index=1, count=4, readers=1, reader=0)
    """

    index: int = 0
    count: int = 1
    readers: int = 1
    reader: int = 0

    def __post_init__(self) -> None:
        for name in ("index", "count", "readers", "reader"):
            validate.an_int(f"DataPartition.{name}", getattr(self, name))
        validate.at_least("DataPartition.count", self.count, 1)
        if not 0 <= self.index < self.count:
            raise ValueError(f"DataPartition.index {self.index} is outside 0..{self.count - 1} (count={self.count})")
        validate.at_least("DataPartition.readers", self.readers, 1)
        if not 0 <= self.reader < self.readers:
            raise ValueError(
                f"DataPartition.reader {self.reader} is outside 0..{self.readers - 1} (readers={self.readers})"
            )

    def rows(self, batch: int) -> int:
        """The rows of a `batch`-record global batch that this share holds.

        A remainder would train on fewer records a step than the run reports, and a batch smaller than
        the share count would leave some share empty, so both are refused.
        """
        if batch < self.count:
            raise ValueError(f"global batch {batch} is smaller than the {self.count} shares reading it")
        if batch % self.count:
            raise ValueError(
                f"global batch {batch} does not split into {self.count} equal shares; "
                f"use a batch that is a multiple of {self.count}"
            )
        return batch // self.count

"""Loading: how fast a dataset is read, which is never what it reads.

It has a module of its own because the streams that honour it and the specs that carry it both need
it, and neither should import the other to get it.
"""

from __future__ import annotations

import dataclasses
import math

from dew.data import validate


@dataclasses.dataclass(frozen=True, kw_only=True)
class Loading:
    """Grain's four throughput knobs. None of them changes which records a run sees or their content.

    workers are processes (0 reads in the training process), threads the reads one worker keeps in
    flight, read_buffer the records one worker reads ahead, and worker_buffer the whole batches one
    worker holds ready for the trainer.
    """

    workers: int = 32
    threads: int = 64
    read_buffer: int = 128
    worker_buffer: int = 2

    def __post_init__(self) -> None:
        validate.fields(self, non_negative=("workers", "threads", "read_buffer", "worker_buffer"))
        for name in ("threads", "read_buffer", "worker_buffer"):
            validate.at_least(f"Loading.{name}", getattr(self, name), 1)

    @property
    def stop_seconds(self) -> float:
        """How long stopping this many workers may take.

        Grain joins its worker processes one after another, about half a second each when idle and up
        to one batch's work when busy, so the allowance grows with the worker count.
        """
        return 5.0 + 1.0 * self.workers

    def prefetch_batches(self, rows: int) -> int:
        """read_buffer counts records; the stream prefetches whole batches of `rows` records."""
        return max(1, math.ceil(self.read_buffer / max(rows, 1)))

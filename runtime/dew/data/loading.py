"""Loading: how fast a dataset is read, which is never what it reads.

It has a module of its own because the streams that honour it and the specs that carry it both need
it, and neither should import the other to get it.
"""

from __future__ import annotations

import dataclasses
import logging
import math

from dew.data import validate

_log = logging.getLogger(__name__)

# The seed's defaults, sized for a TPU host with cores to spare. A default is resolved to the host
# when a stream starts (Loading.started); a value the caller chose is kept.
_WORKERS = 32


@dataclasses.dataclass(frozen=True)
class Loading:
    """Grain's four throughput knobs. None of them changes which records a run sees or their content.

    workers are processes (0 reads in the training process), threads the reads one worker keeps in
    flight, read_buffer the records one worker reads ahead, and worker_buffer the whole batches one
    worker holds ready for the trainer.

    The fields say what a run asks for; `started` says what a host starts for it. A default worker
    count becomes at most the host's spare cores (all but one, which the trainer keeps), and none at
    all for a kind whose reads are plain copies; a count the caller set is kept. "Default" means
    equal to the default: equal Loadings start the same, and a config read back from JSON cannot
    tell `Loading()` from `Loading(workers=32)`.
    """

    workers: int = _WORKERS
    threads: int = 64
    read_buffer: int = 128
    worker_buffer: int = 2

    def __post_init__(self) -> None:
        validate.fields(self, non_negative=("workers", "threads", "read_buffer", "worker_buffer"))
        for name in ("threads", "read_buffer", "worker_buffer"):
            validate.at_least(f"Loading.{name}", getattr(self, name), 1)

    def started(self, *, in_process: bool = False) -> Loading:
        """What a stream starts on this host for this Loading.

        in_process: the kind reads by copying bytes out of a memmap, which a worker process would
        only copy once more through shared memory, so the default reads in the training process.
        Threads need no resolving: a stream keeps no more reads in flight than its prefetch holds.
        """
        from dew.data import workers

        spare = workers.spare_cores()
        if self.workers != _WORKERS:
            if self.workers > spare:
                _log.warning(
                    "Loading(workers=%d) starts more worker processes than the %d cores this host can spare "
                    "beside the trainer; they will compete with it for CPU",
                    self.workers,
                    spare,
                )
            return self
        return dataclasses.replace(self, workers=0 if in_process else min(self.workers, spare))

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

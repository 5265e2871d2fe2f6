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

# The seed's defaults, sized for a TPU host with cores to spare. A default is resolved to the data and
# the host when a stream starts (Loading.started); a value the caller chose is kept.
_WORKERS = 32
# A spawned worker costs a second or two to start (it imports numpy, grain and the decoders) and a
# typical image decode is ~2 ms, so a worker pays for itself once it has about this many records a pass.
RECORDS_PER_WORKER = 1024


@dataclasses.dataclass(frozen=True)
class Loading:
    """Grain's four throughput knobs. None of them changes which records a run sees or their content.

    workers are processes (0 reads in the training process), threads the reads one worker keeps in
    flight, read_buffer the records one worker reads ahead, and worker_buffer the whole batches one
    worker holds ready for the trainer.

    The fields say what a run asks for; `started` says what a host starts for it. A default worker
    count reads in the training process unless workers pay off: only a kind that decodes its records
    (images, clips) starts them, one for every RECORDS_PER_WORKER records of a pass and never more
    than the host's spare cores (all but one, which the trainer keeps). So a small table, a token
    corpus or a chat file reads in process, and a top-level script over it needs no main guard. A
    count the caller set is kept. "Default" means equal to the default: equal Loadings start the
    same, and a config read back from JSON cannot tell `Loading()` from `Loading(workers=32)`.

    Args:
        workers: Worker processes per host (0: read in the training process). The default starts
            workers only for kinds that decode their records, see `started`.
        threads: Reads one worker keeps in flight.
        read_buffer: Records one worker reads ahead of the batch it is building.
        worker_buffer: Whole batches one worker keeps ready for the trainer.

    Examples:
        >>> from dew.data import Loading
        >>> Loading(workers=0)
        Loading(workers=0, threads=64, read_buffer=128, worker_buffer=2)
        >>> Loading().started(decodes=False).workers  # a token corpus reads in process by default
        0
        >>> Loading(workers=1).started(decodes=False).workers  # a count the caller set is kept
        1
    """

    workers: int = _WORKERS
    threads: int = 64
    read_buffer: int = 128
    worker_buffer: int = 2

    def __post_init__(self) -> None:
        validate.fields(self, non_negative=("workers", "threads", "read_buffer", "worker_buffer"))
        for name in ("threads", "read_buffer", "worker_buffer"):
            validate.at_least(f"Loading.{name}", getattr(self, name), 1)

    @property
    def chosen(self) -> bool:
        """Whether the worker count is the caller's rather than the default `started` resolves."""
        return self.workers != _WORKERS

    def started(self, *, in_process: bool = False, decodes: bool = True, records: int | None = None) -> Loading:
        """What a stream starts on this host for this Loading.

        in_process: the kind reads by copying bytes out of a memmap, which a worker process would
        only copy once more through shared memory, so the default reads in the training process.
        decodes: the kind's reads do real work per record (decoding images or clips); one that does
        not reads in process by default too. records: the records of a pass, which bounds the
        default workers to one per RECORDS_PER_WORKER; None (a pipeline of unknown length) bounds
        them by the host alone. Threads need no resolving: a stream keeps no more reads in flight
        than its prefetch holds.
        """
        from dew.data import workers

        spare = workers.spare_cores()
        if self.chosen:
            if self.workers > spare:
                _log.warning(
                    "Loading(workers=%d) starts more worker processes than the %d cores this host can spare "
                    "beside the trainer; they will compete with it for CPU",
                    self.workers,
                    spare,
                )
            return self
        if in_process or not decodes:
            return dataclasses.replace(self, workers=0)
        worth = self.workers if records is None else records // RECORDS_PER_WORKER
        return dataclasses.replace(self, workers=min(self.workers, spare, worth))

    def describe(self, *, in_process: bool = False, decodes: bool = True) -> str:
        """This Loading as a spec shows it: the workers a default resolves to, not the seed's 32.

        What starts can depend on the records, which a spec knows only once it loads, so a decoding
        kind's default says the rule; Dataset's readers show the count that starts.
        """
        if self.chosen:
            return repr(self)
        if in_process or not decodes:
            workers = "0 (in process)"
        else:
            from dew.data import workers as host

            workers = f"'1 per {RECORDS_PER_WORKER} records, at most {min(self.workers, host.spare_cores())}'"
        return repr(self).replace(f"workers={self.workers}", f"workers={workers}", 1)

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

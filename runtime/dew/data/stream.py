"""The global stream every spec trains on (a share's own Grain pipeline is dew.data.share_stream).

The global stream turns a global record order into this share's rows of each step. Step s covers
global records [first_s, first_s + batch_s); share i of c reads first_s + i, first_s + i + c, … . The
work is one function of the step number, run one whole batch at a time rather than one record at a
time: by Grain's worker processes when Loading.workers > 0, and otherwise in the caller's own thread.
"""

from __future__ import annotations

import dataclasses
import threading
import weakref
from collections.abc import Iterator, Mapping
from typing import TYPE_CHECKING, Any

import numpy as np

from dew.data import position, readahead, workers
from dew.data.loading import Loading
from dew.data.order import Order
from dew.data.partition import DataPartition
from dew.data.ramp import Schedule
from dew.data.readahead import InProcess

if TYPE_CHECKING:
    import grain

# grain imports jax when it is installed, so it loads when a stream first runs, not with dew.data.

# The endless stream's step range: far past any run, within what len() can hold, and past the step of
# any position (position.MAX_RECORDS records, a step of one record each at most).
_ENDLESS = position.MAX_RECORDS


def share_records(schedule: Schedule, partition: DataPartition, step: int) -> np.ndarray:
    """The global records a share reads at `step`: first + index, first + index + count, … of the step's
    batch. Every reader of a share reads the same records; which source records they are is the order's."""
    first, batch = schedule.step(step)
    # The stream checked at its start that every stage still ahead splits into the shares.
    return np.arange(first + partition.index, first + batch, partition.count, dtype=np.int64)


class _ShareRows:
    """Step number → this share's rows of that step. Picklable, so Grain workers can run it.

    A close can come from another thread than the one reading (a watchdog, a signal handler), and
    a read still running after close returned could touch a memmap the caller then rewrites (and
    fault). This counts the reads running in this process so close can wait them out, and turns
    away reads that start after it.
    """

    def __init__(self, order: Order, schedule: Schedule, partition: DataPartition) -> None:
        self.order, self.schedule, self.partition = order, schedule, partition
        self._running = 0
        self._stopped = False
        self._idle = threading.Condition()
        # Closed by stop(): the requests this stream's running reads queued and that have not started yet
        # are cancelled (readahead.Cancelled) and range requests in flight aborted, so a silent server
        # does not hold stop.
        self._closing = readahead.Closing()

    def __getstate__(self) -> dict[str, Any]:
        return {"order": self.order, "schedule": self.schedule, "partition": self.partition}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["order"], state["schedule"], state["partition"])

    def __call__(self, step: int) -> Any:
        with self._idle:
            if self._stopped:
                return None  # the iterator is closed: nobody will take this step
            self._running += 1
        try:
            with readahead.closed_by(self._closing):
                return self.order.read(share_records(self.schedule, self.partition, step))
        except readahead.Cancelled:
            return None  # closed while it read: nobody takes this step, and no part of it is handed out
        finally:
            with self._idle:
                self._running -= 1
                if self._stopped:  # only stop() waits for the count
                    self._idle.notify_all()

    def stop(self, timeout: float) -> bool:
        """Turns away new reads and waits up to `timeout` s for running ones; False if some still run."""
        with self._idle:
            self._stopped = True
            self._closing.close()
            return self._idle.wait_for(lambda: self._running == 0, timeout)


def _through_grain(reads: _ShareRows, step: int, stop: int, loading: Loading) -> grain.IterDataset:
    """Grain running `reads` for steps [step, stop), up to `loading.threads` steps at a time."""
    import grain

    prefetch = loading.prefetch_batches(reads.partition.rows(reads.schedule.step(step)[1]))
    read = grain.ReadOptions(num_threads=min(loading.threads, prefetch), prefetch_buffer_size=prefetch)
    return grain.MapDataset.range(step, stop).map(reads).to_iter_dataset(read)


def _owned(batch: Any) -> Any:
    """`batch` with every array a worker handed over in shared memory copied into the caller's own.

    Grain frees a shared-memory array when it is collected, which for a batch the caller still
    holds at interpreter exit is after grain's modules are gone: it fails there, loudly, and leaves
    the segment behind. One copy of a batch is small beside the reads and decoding that made it.
    """
    if isinstance(batch, np.ndarray):
        return batch if type(batch) is np.ndarray else np.array(batch)
    if isinstance(batch, dict):
        return {key: _owned(value) for key, value in batch.items()}
    if type(batch) in (list, tuple):
        return type(batch)(_owned(value) for value in batch)
    return batch


class Started:
    """What one stream started: grain's iterator and, for a global stream, the reads it runs.

    A stream's finalizer holds this rather than the stream, so that what a stream started is closed
    when the stream is collected or the interpreter exits without close(): then grain's workers and
    their shared memory go while the modules that free them are still loaded.
    """

    def __init__(
        self,
        iterator: grain.DatasetIterator | InProcess,
        *,
        from_workers: bool,
        rows: _ShareRows | None,
        stop_seconds: float,
    ) -> None:
        self.iterator: grain.DatasetIterator | InProcess | None = iterator
        self.from_workers, self.rows, self.stop_seconds = from_workers, rows, stop_seconds

    def __next__(self) -> Any:
        iterator = self.iterator
        if iterator is None:
            raise RuntimeError("this data iterator is closed")
        try:
            batch = next(iterator)
        except RuntimeError as error:
            if self.iterator is None:  # closed from another thread while grain was queueing reads
                raise RuntimeError("this data iterator was closed during this read") from error
            raise
        return _owned(batch) if self.from_workers else batch

    def close(self) -> None:
        # Dropped, not only closed: grain's iterators close themselves again when collected, and at
        # interpreter exit that must happen now, while grain's modules are still loaded.
        iterator, self.iterator = self.iterator, None
        if iterator is None:
            return
        iterator.close()
        if self.rows is not None and not self.rows.stop(self.stop_seconds):
            raise RuntimeError(f"a read of this data iterator was still running {self.stop_seconds:.0f} s after close")


class GlobalStream:
    """One share's batches of a global order; its position is the global record count handed over.

    get_state/set_state make it Checkpointable. A saved position resumes on any share count that
    divides the batch of every step still to be read (a ramp's finished stages do not count), and is
    refused when it was saved over a different order.

    Args:
        order: The global order of records; `order.read(ks)` is the batch of global records ks.
        schedule: Each step's first global record and batch (a flat batch, or a ramp's stages).
        partition: Which share of every global batch this stream reads.
        loading: The reader threads and worker processes that read it.
        steps: Steps until the stream ends; None for an endless one.
        synchronous: Read in the caller's thread when there are no workers (plain copies, no decoding).
        remote: The order reads gs:// corpora, so an in-process stream reads steps ahead.

    Examples:
        >>> from dew.data import DataPartition, GlobalStream, Loading
        >>> from dew.data.order import ShuffledEpochs
        >>> from dew.data.ramp import Schedule
        >>> order, batch = ShuffledEpochs(list(range(100)), seed=0), Schedule.flat(8)
        >>> def share(index, count):
        ...     return GlobalStream(order, batch, DataPartition(index, count), Loading(workers=0), synchronous=True)
        >>> with share(0, 2) as stream:  # this share's 4 rows of the 8 each step holds
        ...     rows = len(next(stream))
        ...     state = stream.get_state()
        >>> rows, state["records"]
        (4, 8)
        >>> with share(1, 4) as resumed:  # the position resumes on another share count
        ...     resumed.set_state(state)
        ...     resumed.records, len(next(resumed))
        (8, 2)
    """

    def __init__(
        self,
        order: Order,
        schedule: Schedule,
        partition: DataPartition,
        loading: Loading,
        *,
        steps: int | None = None,
        synchronous: bool = False,
        remote: bool = False,
    ) -> None:
        self.order, self.schedule, self.partition, self.loading = order, schedule, partition, loading
        self.remote = remote
        self.steps = steps
        # Without worker processes, a kind whose reads are plain copies reads in the caller's thread
        # (readahead.InProcess); one that decodes (images, clips) keeps Grain's reader threads, which overlap
        # the decoding that releases the GIL.
        self.synchronous = synchronous
        # A share count that does not divide the final batch is refused now; one that does not divide an
        # earlier stage's batch when the stream starts, since a run resumed past that stage never reads it.
        partition.rows(schedule.final)
        self._next_step = 0
        # Real tokens each corpus supplied to the steps before _counted_step, by every share together.
        # Each share counts whole global steps by index arithmetic, so every share holds the same counts;
        # the counting waits for get_state, where one vectorised pass is far cheaper than one per step.
        self._tokens: dict[str, int] = {}
        self._counted_step = 0
        self._started: Started | None = None
        # Closes what the stream started, on close(), on collection, or at exit without either.
        self._finalizer: weakref.finalize | None = None
        self._closed = False

    def __iter__(self) -> Iterator[Any]:
        return self

    def __next__(self) -> Any:
        if self._closed:
            raise RuntimeError("this data iterator is closed")
        if self.steps is not None and self._next_step >= self.steps:
            raise StopIteration
        # A local: a close from another thread may drop self._started meanwhile, and then this read
        # is refused by the one it started on.
        started = self._started or self._start()
        batch = next(started)
        self._next_step += 1
        return batch

    def _check_stages_ahead(self, step: int) -> None:
        """Refuses a share count that does not divide the batch of a stage still to be read from `step`."""
        for stage in self.schedule.stages_from(step):
            try:
                self.partition.rows(stage.batch)
            except ValueError as error:
                raise ValueError(f"{error} (the ramp stage from global record {stage.records})") from None

    def _start(self) -> Started:
        self._check_stages_ahead(self._next_step)
        reads = _ShareRows(self.order, self.schedule, self.partition)
        iterator: grain.DatasetIterator | InProcess
        stop = _ENDLESS if self.steps is None else self.steps
        if self.loading.workers:
            iterator = iter(workers.prefetch(_through_grain(reads, self._next_step, stop, self.loading), self.loading))
        elif self.synchronous:
            # Over gs:// the reads of the next steps are in flight while this one trains (readahead).
            ahead = self.loading.read_buffer // self.partition.rows(self.schedule.final) if self.remote else 0
            iterator = InProcess(reads, self._next_step, stop, ahead=ahead)
        else:
            iterator = iter(_through_grain(reads, self._next_step, stop, self.loading))
        self._started = Started(
            iterator, from_workers=self.loading.workers > 0, rows=reads, stop_seconds=self.loading.stop_seconds
        )
        self._finalizer = weakref.finalize(self, self._started.close)
        return self._started

    @property
    def records(self) -> int:
        """Global records handed over so far, by every share together."""
        return self.schedule.step(self._next_step)[0]

    def get_state(self) -> position.Position:
        self._count_tokens()
        return position.GlobalPosition(self.records, self.order.describe(), dict(self._tokens)).to_state()

    def _count_tokens(self, chunk: int = 1 << 20) -> None:
        first, last = self.schedule.step(self._counted_step)[0], self.records
        for start in range(first, last, chunk):
            ks = np.arange(start, min(last, start + chunk), dtype=np.int64)
            for name, count in self.order.record_tokens(ks).items():
                self._tokens[name] = self._tokens.get(name, 0) + count
        self._counted_step = self._next_step

    def set_state(self, state: Mapping[str, Any]) -> None:
        saved = position.parse(state)
        if isinstance(saved, position.SharePosition):
            raise ValueError(
                f"this stream's position is a global record count, but the saved one is share "
                f"{saved.index} of {saved.count}'s own grain state over {position.describe(saved.reads)}"
            )
        self.order.check_resume(saved.reads, saved.records)
        step = self.schedule.step_at(saved.records)
        if self.steps is not None and step > self.steps:
            raise ValueError(f"saved position at step {step} is past the end of this {self.steps}-step pass")
        self._check_stages_ahead(step)  # now, where the saved position is named, rather than at the next batch
        self._release()
        self._next_step = self._counted_step = step
        # A corpus that moved (another path, bucket or mount) keeps its counter under its new name.
        renamed = self.order.renamed_corpora(saved.reads)
        self._tokens = {renamed.get(str(name), str(name)): int(count) for name, count in saved.tokens.items()}

    def _release(self) -> None:
        if self._finalizer is not None:
            self._started, finalizer, self._finalizer = None, self._finalizer, None
            finalizer()

    def close(self) -> None:
        """Stops the readers (threads and worker processes) this iterator started. Idempotent."""
        self._closed = True  # first, so that a next() in another thread cannot start the stream again
        self._release()

    def __enter__(self) -> GlobalStream:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()


@dataclasses.dataclass(frozen=True)
class GlobalReader:
    """Opens a GlobalStream over one share; what Dataset.train and Dataset.val hold for every spec."""

    order: Order
    schedule: Schedule
    loading: Loading
    steps: int | None = None
    synchronous: bool = False
    remote: bool = False  # it reads gs:// corpora: an in-process stream reads ahead

    def __call__(self, partition: DataPartition | None = None) -> GlobalStream:
        partition = partition or DataPartition()
        return GlobalStream(
            self.order,
            self.schedule,
            partition,
            self.loading,
            steps=self.steps,
            synchronous=self.synchronous,
            remote=self.remote,
        )

    def __repr__(self) -> str:
        steps = "endless" if self.steps is None else f"steps={self.steps}"
        reads = position.describe(self.order.describe())
        return f"GlobalReader({steps}, batch={self.schedule.final}, workers={self.loading.workers}, reads={reads})"

    def with_schedule(self, schedule: Schedule) -> GlobalReader:
        return dataclasses.replace(self, schedule=schedule)

"""Dataset: the batch iterators a run trains and validates on."""

from __future__ import annotations

import dataclasses
import sys
from collections.abc import Callable, Iterator
from typing import TYPE_CHECKING, Any, Protocol, TypeAlias, runtime_checkable

from dew.data import remote, validate
from dew.data.loading import Loading
from dew.data.order import OnePass, Order, ShuffledEpochs
from dew.data.partition import DataPartition
from dew.data.position import Position
from dew.data.ramp import Ramp, Schedule
from dew.data.share_stream import ShareReader
from dew.data.stream import GlobalReader

# A kind's decoding put over an order of its records: (order, training) -> the order batches read.
Decode: TypeAlias = Callable[[Order, bool], Order]

if TYPE_CHECKING:
    import grain

    # What from_grain reads: a MapDataset read by index, or the IterDataset of one share, built per partition.
    GrainPipeline: TypeAlias = grain.MapDataset | Callable[[DataPartition], grain.IterDataset]

# Opens a fresh iterator over the share a partition names; the caller owns it and closes it.
Reader = Callable[[DataPartition], Iterator[Any]]


@runtime_checkable
class Checkpointable(Protocol):
    """A stream that can say where it stopped and be put back there (dew.data.position parses the state).

    Examples:
        >>> from dew.data import Checkpointable
        >>> isinstance(iter([]), Checkpointable)  # a plain iterator has no position
        False
    """

    def get_state(self) -> Position: ...

    def set_state(self, state: Position) -> None: ...


@dataclasses.dataclass(frozen=True)
class Dataset:
    """Opens the batches a run trains and validates on.

    `train(partition)` is an endless shuffled stream; `val(partition)` one pass over the held-out
    records in a fixed order that ends by itself, or None when nothing is held out. Both read the
    share of each global batch that the partition names. `batch` is the global batch (the one a ramp
    ends at), `records` the training records of one pass.

    Args:
        train: Opens the training stream of a partition's share.
        val: Opens the validation pass of a share, or None.
        records: Training records of one pass, or None for a stream without one.
        batch: The global batch.
        ramp: The batch ramp, when the run grows its batch (ramped).

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from dew.data import DataPartition, Loading, datasets
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.arange(1000, dtype=np.uint16).tofile(path)
        >>> spec = datasets.TokenWindows(path=path, seq_len=8, val_batches=1, loading=Loading(workers=0))
        >>> data = spec.load(batch=4)
        >>> with data.train(DataPartition(index=0, count=2)) as stream:  # this host's half of each batch
        ...     first = next(stream)
        ...     state = stream.get_state()
        >>> first["text"].shape
        (2, 9)
        >>> held_out = list(data.val(DataPartition()))
        >>> len(held_out), held_out[0]["text"].shape
        (1, (4, 9))
    """

    train: Reader
    val: Reader | None
    records: int | None
    batch: int
    ramp: Ramp | None = None

    def __post_init__(self) -> None:
        validate.positive_int("Dataset.batch", self.batch)
        if self.records is not None:
            # A count of a pass may be any integer type (numpy's, from index arithmetic); only its sign matters.
            validate.at_least("Dataset.records", self.records, 0)

    @property
    def steps_per_epoch(self) -> int:
        """Steps in one pass over the training records."""
        return self.epoch_steps(1)

    def __len__(self) -> int:
        """Steps in one pass over the training records: len(data) is data.steps_per_epoch."""
        return self.steps_per_epoch

    def __bool__(self) -> bool:
        return True  # a Dataset is a value even when it has no epoch for __len__ to count

    def __repr__(self) -> str:
        records = "unknown" if self.records is None else self.records
        steps = "" if self.records is None else f", steps_per_epoch={self.steps_per_epoch}"
        ramp = "" if self.ramp is None else f", ramp={self.ramp!r}"
        return f"Dataset(batch={self.batch}, records={records}{steps}{ramp}, train={self.train!r}, val={self.val!r})"

    def epoch_steps(self, epochs: int = 1) -> int:
        """Steps that `epochs` passes over the training records take (more under a batch ramp)."""
        if self.records is None:
            raise ValueError("this stream has no record count, so it has no epoch: give the run's length in steps")
        total = self.records * epochs
        if self.ramp is not None:
            return self.ramp.steps_for(total, self.batch)
        return -(-total // self.batch)

    @classmethod
    def from_grain(
        cls,
        train: GrainPipeline,
        *,
        batch: int,
        validation: GrainPipeline | None = None,
        records: int | None = None,
        loading: Loading = Loading(),
    ) -> Dataset:
        """A run over Grain pipelines the caller built; order, shuffle and record transforms are theirs.

        A MapDataset is read by index, so it gets the stream every spec gets: repeated for ever, cut
        into the reader's share, whole batches only, and saved as one global record count (shuffle it
        yourself; the stream adds no shuffle of its own). A function from a partition to that share's
        IterDataset is batched where it is and saves Grain's own iterator state, which resumes only on
        a reader of the same share; its repetition is the caller's too: a training pipeline that runs
        dry ends the stream, naming the share. records defaults to a MapDataset's length,
        and to None (no epoch) for one already repeated, whose length is no pass.
        """
        import grain

        validate.positive_int("Dataset.from_grain(batch=)", batch)
        loading = loading.started()
        # A dataset repeated for ever reports sys.maxsize, which is no pass: then the caller gives one.
        if isinstance(train, grain.MapDataset) and records is None and len(train) < sys.maxsize:
            records = len(train)
        return cls(
            train=_grain_reader(train, batch, loading, endless=True),
            val=None if validation is None else _grain_reader(validation, batch, loading, endless=False),
            records=records,
            batch=batch,
        )


def ramped(dataset: Dataset, ramp: Ramp) -> Dataset:
    """`dataset` with its training batch growing to `dataset.batch` over `ramp`.

    Validation keeps the full batch: a score over a changing number of records would measure a
    different thing each time. Only a stream whose position is a global record count can ramp; one
    that batches its own share (a grain pipeline built per partition) is refused by name.

    Args:
        dataset: What a spec's load gave; its batch is the one the ramp ends at.
        ramp: How the batch grows.

    Returns:
        The same dataset, its training stream read in the ramp's steps and its `ramp` set.

    Examples:
        >>> import os, tempfile
        >>> import numpy as np
        >>> from dew.data import DataPartition, Loading, Ramp, datasets, ramped
        >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
        >>> np.arange(1000, dtype=np.uint16).tofile(path)
        >>> data = datasets.TokenWindows(path=path, seq_len=8, loading=Loading(workers=0)).load(batch=4)
        >>> grown = ramped(data, Ramp(start=2, increment=1, samples=4))
        >>> with grown.train(DataPartition()) as stream:
        ...     [len(next(stream)["text"]) for _ in range(4)]
        [2, 3, 4, 4]
    """
    if not isinstance(dataset.train, GlobalReader):
        raise TypeError(
            f"ramped needs a training stream whose position is a global record count; "
            f"{type(dataset.train).__name__} batches its own share and keeps a share's own state"
        )
    schedule = Schedule(ramp.stages(dataset.batch))
    return dataclasses.replace(dataset, train=dataset.train.with_schedule(schedule), ramp=ramp)


class _InOrder(ShuffledEpochs):
    """A caller's MapDataset repeated in its own order: their order is theirs to shuffle."""

    def indices(self, ks: Any) -> Any:
        return (ks + self.offset) % self.size

    def describe(self) -> dict[str, Any]:
        return {"order": "repeated", "source": super().describe()["source"]}


def _grain_reader(ds: Any, batch: int, loading: Loading, *, endless: bool) -> Reader:
    import grain

    if isinstance(ds, grain.MapDataset):
        if endless:
            return GlobalReader(_InOrder(ds, seed=0), Schedule.flat(batch), loading)
        if len(ds) >= sys.maxsize:  # what grain's repeat() reports: a pass that never ends
            raise ValueError("the validation pipeline repeats for ever; hand over one pass, before its repeat()")
        if len(ds) < batch:  # an empty pass would leave the run unvalidated without a word
            raise ValueError(
                f"the validation pipeline holds {len(ds)} records, fewer than one global batch of {batch}; lower "
                "the batch or hold out more"
            )
        return GlobalReader(OnePass(ds), Schedule.flat(batch), loading, steps=len(ds) // batch)
    if callable(ds):
        reads = {"grain": getattr(ds, "__qualname__", type(ds).__name__)}
        return ShareReader(ds, batch, loading, reads, endless=endless)
    raise TypeError(f"from_grain takes a MapDataset or a function partition -> IterDataset, got {type(ds).__name__}")


def global_dataset(
    *,
    train: Any,
    val: Any | None,
    batch: int,
    seed: int,
    loading: Loading,
    val_batches: int | None,
    order: Order | None = None,
    records: int | None = None,
    in_process: bool = False,
    decodes: bool = False,
    decode: Decode | None = None,
) -> Dataset:
    """What every indexed spec's load builds: a shuffled endless stream and a bounded validation pass.

    `order` replaces the default shuffled-epochs order over `train` (a mixture, phases); `decode`, the
    kind's hook, puts its decoding over each order, `decode(order, training)` (training: the stream,
    which may augment, not the validation pass);
    `val_batches` bounds the validation pass, None reading every whole batch of it; `in_process`
    and `decodes` say what a default Loading starts (Loading.started): workers only for a kind that
    decodes, over records enough to pay for them.
    """
    validate.positive_int("load(batch=)", batch)
    if records is not None and train is not None and records > len(train):
        raise ValueError(
            f"records={records} is more than the {len(train)} records the training split holds: a pass over "
            "it would count records that do not exist; leave records unset to use the split's own length"
        )
    if records is None and train is not None:
        records = len(train)
    loading = loading.started(in_process=in_process, decodes=decodes, records=records)
    train_order = order if order is not None else ShuffledEpochs(train, seed)
    on_gs = reads_gs(train_order)
    val_reader = None
    # An empty split is refused too: skipping it would leave Dataset.val None without a word.
    if val is not None and val_batches != 0:
        steps = len(val) // batch
        if val_batches is not None:
            steps = min(steps, val_batches)
        if steps == 0:
            raise ValueError(
                f"the validation split holds {len(val)} records, fewer than one global batch of {batch}; "
                "lower the batch or hold out more (val_batches=0 holds nothing out)"
            )
        val_order: Order = OnePass(val) if decode is None else decode(OnePass(val), False)
        val_reader = GlobalReader(
            val_order, Schedule.flat(batch), loading, steps=steps, synchronous=in_process, remote=on_gs
        )
    if decode is not None:
        train_order = decode(train_order, True)
    return Dataset(
        train=GlobalReader(train_order, Schedule.flat(batch), loading, synchronous=in_process, remote=on_gs),
        val=val_reader,
        records=records,
        batch=batch,
    )


def reads_gs(order: Order) -> bool:
    """Whether an order reads a corpus on gs:// (a mixture names each corpus by its path)."""
    return any(remote.is_remote(str(getattr(corpus, "name", ""))) for corpus in getattr(order, "corpora", ()))

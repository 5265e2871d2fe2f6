"""A streamed Hugging Face split: each share streams its own rows, and its position is its own.

An IterableDataset has no index, so there is no global order to cut: every share reads the part
datasets.distributed.split_dataset_by_node gives it, in file order or through HF's buffered shuffle,
and batches it where it is. The position is (epoch, rows this share has read in it) plus, in file
order, HF's own state_dict, which reopens the files at that row; a shuffle buffer's contents are not in
HF's state, so a shuffled stream resumes by reading its epoch again up to the row it stopped at. Either
way the resumed batches equal the uninterrupted ones, on a reader of the same share only.

This module subclasses grain's classes, so it is imported when a streamed split is first loaded.
"""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

import grain

from dew.data.dataset import Dataset
from dew.data.extras import require
from dew.data.loading import Loading
from dew.data.partition import DataPartition
from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hooks import Hooked, Preprocess, collate_rows
from dew.data.share_stream import ShareStream

if TYPE_CHECKING:
    from dew.data.providers.hub import HubDataset


@dataclasses.dataclass(frozen=True)
class _Plan:
    """What one streamed split reads; the same on every share."""

    name: str
    split: str
    options: HFOptions
    dataset: Any  # an IterableDataset the caller handed over, or None to load by name
    shuffle_buffer: int
    seed: int
    endless: bool
    batches: int | None  # bounds a validation pass, in batches of each share
    preprocess: Preprocess | None

    @property
    def label(self) -> str:
        return f"hf {self.name!r} split {self.split!r} (streamed)" if self.name else f"the streamed {self.split!r}"

    def reads(self) -> dict[str, Any]:
        return {
            "hf": self.name or None,
            "config": self.options.config,
            "split": self.split,
            "streaming": True,
            "shuffle_buffer": self.shuffle_buffer,
            "seed": self.seed if self.shuffle_buffer else None,
            "preprocess": None if self.preprocess is None else str(self.preprocess),
            **_rows_decided_by(self.options),
        }


def _rows_decided_by(options: HFOptions) -> dict[str, Any]:
    """The options that decide which rows a split holds, those set, in JSON form.

    A streamed split has no fingerprint, so its saved position names these beside the dataset's name:
    another file list, data directory, revision or schema is another stream. Where the library keeps its
    cache, the token and the like change no row and are left out.
    """
    out: dict[str, Any] = {}
    for name in ("data_dir", "data_files", "revision", "features"):
        value = getattr(options, name)
        if value is None:
            continue
        if name == "features":
            value = value.to_dict() if hasattr(value, "to_dict") else str(value)
        elif isinstance(value, tuple):
            value = list(value)
        elif isinstance(value, Mapping):
            value = {k: list(v) if isinstance(v, tuple) else v for k, v in value.items()}
        out[name] = value
    return out


class _StreamedShare(grain.IterDataset):
    """One share's rows of a streamed split, as HF hands them over (its part of the files)."""

    def __init__(self, plan: _Plan, partition: DataPartition, rows: int) -> None:
        super().__init__()
        self.plan, self.partition, self.rows = plan, partition, rows

    def __iter__(self) -> _StreamedShareIterator:
        return _StreamedShareIterator(self.plan, self.partition, self.rows)


class _StreamedShareIterator(grain.DatasetIterator):
    """One share's rows, epoch after epoch for training; get_state says where it stands."""

    def __init__(self, plan: _Plan, partition: DataPartition, rows: int) -> None:
        super().__init__()
        self.plan, self.partition = plan, partition
        self.limit = None if plan.batches is None else plan.batches * rows
        self.where = f"share {partition.index} of {partition.count} of {plan.label}"
        self.hooked = None if plan.preprocess is None else Hooked(plan.preprocess, plan.label)
        self.epoch, self.read = 0, 0  # rows read in this epoch
        self.handed = 0  # rows handed over in all, what a validation pass is bounded by
        self.ds: Any = None
        self.it: Any = None

    def _open(self, skip: int = 0, hf_state: dict[str, Any] | None = None) -> None:
        split_dataset_by_node = require(
            "datasets.distributed", for_what="HubDataset(streaming=True)"
        ).split_dataset_by_node
        source = self.plan.dataset
        if source is None:
            try:
                source = self.plan.options.load(self.plan.name, self.plan.split, streaming=True)
            except StopIteration:
                # Left to propagate, it would read as the end of this stream and end training quietly.
                raise ValueError(
                    f"datasets ran out of rows while opening {self.plan.label}, before the first one (empty data "
                    "files?)"
                ) from None
        # A new object for every share, even a single one, so no two iterations share HF's state.
        ds = split_dataset_by_node(source, rank=self.partition.index, world_size=self.partition.count)
        if self.plan.shuffle_buffer and self.plan.endless:
            ds = ds.shuffle(seed=self.plan.seed, buffer_size=self.plan.shuffle_buffer)
            # HF reorders the files of every epoch past 0, so only a shuffled stream sets one.
            ds.set_epoch(self.epoch)
        if hf_state is not None:
            ds.load_state_dict(hf_state)
            skip = 0
        self.ds, self.it = ds, iter(ds)
        for done in range(skip):
            try:
                next(self.it)
            except StopIteration:
                raise ValueError(
                    f"{self.where} ended after {done} rows of epoch {self.epoch}, before the saved position at row "
                    f"{skip}: the data under the stream changed since the position was saved"
                ) from None

    def __next__(self) -> dict[str, Any]:
        if self.limit is not None and self.handed >= self.limit:
            raise StopIteration
        while True:
            if self.it is None:
                self._open()
            try:
                row = next(self.it)
                break
            except StopIteration:
                if not self.plan.endless:
                    raise
                if self.read == 0:
                    raise ValueError(f"{self.where} holds no rows, so it cannot repeat for ever") from None
                self.epoch, self.read, self.it, self.ds = self.epoch + 1, 0, None, None
        self.read += 1
        self.handed += 1
        if self.hooked is None:
            return row
        return self.hooked.apply([row], [f"{self.read - 1} of epoch {self.epoch} of share {self.partition.index}"])[0]

    def get_state(self) -> dict[str, Any]:
        exact = self.ds is not None and not (self.plan.shuffle_buffer and self.plan.endless)
        return {
            "epoch": self.epoch,
            "rows": self.read,
            "handed": self.handed,
            "hf": self.ds.state_dict() if exact else None,
        }

    def set_state(self, state: dict[str, Any]) -> None:
        self.close_stream()
        self.epoch, self.read, self.handed = int(state["epoch"]), int(state["rows"]), int(state["handed"])
        if self.read:
            self._open(skip=self.read, hf_state=state.get("hf"))

    def close_stream(self) -> None:
        if self.it is not None and hasattr(self.it, "close"):
            self.it.close()
        self.it = self.ds = None

    def close(self) -> None:
        self.close_stream()
        super().close()


@dataclasses.dataclass(frozen=True)
class HubStreamReader:
    """Opens one share's streamed batches; what Dataset.train and Dataset.val hold for a streamed split."""

    plan: _Plan
    batch: int
    loading: Loading

    def __call__(self, partition: DataPartition | None = None) -> ShareStream:
        partition = partition or DataPartition()
        rows = partition.rows(self.batch)
        ds = _StreamedShare(self.plan, partition, rows).batch(
            rows, drop_remainder=True, batch_fn=functools.partial(collate_rows, where=self.plan.label)
        )
        # Streaming is network- and parse-bound: a reader thread keeps batches ready. Worker processes
        # would each batch their own rows and interleave them, changing the batches with the loading.
        ds = grain.experimental.ThreadPrefetchIterDataset(ds, prefetch_buffer_size=self.loading.prefetch_batches(rows))
        return ShareStream(iter(ds), partition, self.plan.reads())


def streamed(spec: HubDataset, batch: int, dataset: Any) -> Dataset:
    """The streamed training stream of `spec`'s split, and its unshuffled validation pass."""
    if not isinstance(spec.name, str):
        raise ValueError(
            "a streamed HubDataset reads one dataset; a weighted mixture is read by index (streaming=False)"
        )
    if not spec.name and dataset is None:
        raise ValueError("HubDataset.name is empty: name the dataset to stream")
    common: dict[str, Any] = {
        "name": spec.name,
        "options": spec.options,
        "seed": spec.seed,
        "preprocess": spec.preprocess,
    }
    train = _Plan(
        split=spec.split, dataset=dataset, shuffle_buffer=spec.shuffle_buffer, endless=True, batches=None, **common
    )
    val = None
    if spec.val_split is not None and spec.val_batches != 0:
        plan = _Plan(
            split=spec.val_split, dataset=None, shuffle_buffer=0, endless=False, batches=spec.val_batches, **common
        )
        val = HubStreamReader(plan, batch, spec.loading)
    return Dataset(train=HubStreamReader(train, batch, spec.loading), val=val, records=spec.records, batch=batch)

"""The reader skeleton every kind of packed-dict records shares: a committed split's shards, read a batch
at a time, decoded by the kind.

    committed_split (meta.json, read once, names the split's shards) → CommittedRecords (open a shard on
    its first read, checked against meta.json; one read a shard a batch) → decode (the kind's hook) →
    Window (the training head and the held-out tail) → the spec's global order

A kind subclasses CommittedRecords with its `decode(raw, where)`: packed records in, the kind's batch
out. The base knows nothing of images or clips; a kind's reader never patches a Dataset the generic
helper built. Window and the markers a source adds beside a batch's fields (WHERE, VERIFIED) live
here too, so every kind imports them from one place.
"""

from __future__ import annotations

import os
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import formats, remote
from dew.data.formats import Meta, Shard
from dew.data.record_shards import ShardReaders
from dew.data.records import BatchRecords, describe_source, read_batch

# Where each record of a batch came from ("<file> record <i>"), named in the error a bad record raises.
# A source adds it beside the fields and the kind's order removes it, so no batch a model sees carries it.
WHERE = "__where__"
# Which records of a batch come from a committed shard whose checksum was verified when it was opened
# (a JPEG of one may take pixels.decode_whole_jpeg). Added and removed like WHERE.
VERIFIED = "__verified__"


def committed_split(
    meta: Meta, directory: str, split: str, *, reader: str, writer: str
) -> tuple[tuple[Shard, ...], list[str]]:
    """The shards of `split` in a committed directory whose meta.json is `meta`, and each one's file;
    refused by name when the split is missing or not held in .array_record shards (`reader` reads only
    those; `writer` writes them).

    A local shard's size is checked now, its content when a reader first opens it; a gs:// one is checked
    whole after its fetch, when a reader first opens it.
    """
    if split not in meta.splits:
        raise ValueError(
            f"{directory} has no split {split!r}; its splits: {', '.join(sorted(meta.splits))}: give split= one of them"
        )
    shards = meta.shards(split)
    if not shards or any(formats.shard_extension(s.name) != "array_record" for s in shards):
        raise ValueError(
            f"{directory}: split {split!r} is not held in .array_record shards, the only ones {reader} read by "
            f"index; rerun {writer} with --format array_record (its default) to write them"
        )
    return shards, shard_files(directory, shards)


def shard_files(directory: str, shards: Sequence[Shard]) -> list[str]:
    """Each shard's file: a gs:// one where it lies (checked when a reader first opens it), a local one
    after its size is checked (its content when a reader first opens it)."""
    if remote.is_remote(directory):
        return [os.path.join(directory, s.name) for s in shards]
    return [formats.verify_shard(directory, s) for s in shards]


class CommittedRecords(BatchRecords):
    """Every record of some ArrayRecord files in order, read by index a batch at a time and decoded by
    the kind (`decode`).

    With `shards` (a committed directory's, one a file) each file is checked against meta.json when it
    is first opened (dew.data.record_shards): hashed (local) or fetched whole (gs://) once per host and
    file, or, for a gs:// shard with a record index, read by range with every block checked; its
    footer's record count is compared. Without (a raw shard set) the files are read as they are. A file
    is opened in the process that reads it: readers never travel in a pickle.
    """

    WHAT = "records"  # what the records are, in an out-of-range error

    def __init__(
        self,
        files: Sequence[str],
        counts: Sequence[int],
        description: dict[str, Any],
        *,
        directory: str | None = None,
        shards: Sequence[Shard] | None = None,
        labels: Sequence[str] | None = None,
    ) -> None:
        """labels: what a record's `where` calls each file (default: the file itself)."""
        self.files, self.description = tuple(files), description
        self.labels = self.files if labels is None else tuple(labels)
        self.directory, self.shards = directory, None if shards is None else tuple(shards)
        self.ends = np.cumsum(np.asarray(counts, dtype=np.int64))
        self.readers = ShardReaders(self.files, directory=directory, shards=shards)

    def __len__(self) -> int:
        return int(self.ends[-1]) if len(self.ends) else 0

    def describe(self) -> dict[str, Any]:
        return {**self.description, "records": len(self)}

    def decode(self, raw: list[bytes], where: list[str], verified: list[bool]) -> dict[str, Any]:
        """The kind's batch of these packed records; `where` names each ("<file> record <i>") for errors,
        `verified` says whether each came from a file checked against its commit's checksum."""
        raise NotImplementedError

    def read_raw(self, indices: np.ndarray) -> tuple[list[bytes], list[str], list[int]]:
        """The packed records at `indices`, where each is, and the file each came from."""
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= len(self)):
            raise IndexError(f"record {int(indices.max())} is outside these {len(self)} {self.WHAT}")
        file_of = np.searchsorted(self.ends, indices, side="right")
        local = indices - np.concatenate([np.zeros(1, dtype=np.int64), self.ends])[file_of]
        raw = self.readers.read(file_of, local)
        files = file_of.tolist()
        where = [f"{self.labels[f]} record {i}" for f, i in zip(files, local.tolist(), strict=True)]
        return raw, where, files

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        raw, where, files = self.read_raw(indices)
        return self.decode(raw, where, [self.readers.verified(f) for f in files])


class Window(BatchRecords):
    """Records first .. first + count of `source`: a training head or a held-out tail."""

    def __init__(self, source: Any, first: int, count: int) -> None:
        if first < 0 or count < 0 or first + count > len(source):
            raise ValueError(f"records {first}..{first + count} are outside a source of {len(source)}")
        self.source, self.first, self.count = source, first, count

    def __len__(self) -> int:
        return self.count

    def read_batch(self, indices: np.ndarray) -> Any:
        indices = np.asarray(indices, dtype=np.int64)
        if indices.size and (int(indices.min()) < 0 or int(indices.max()) >= self.count):
            raise IndexError(f"record {int(indices.max())} is outside this window of {self.count} records")
        return read_batch(self.source, indices + self.first)

    def describe(self) -> dict[str, Any]:
        return {"first": self.first, "count": self.count, "source": describe_source(self.source)}

"""WriteShards: grouped documents → committed shard files (.bin, ArrayRecord or parquet), one Shard each.

A shard's documents arrive from the shuffle in no particular order. They are spilled to a local file
as they come and only their keys are kept and sorted, so a worker holds 24 bytes a document rather than
the shard; the shard is then written in key order to a local file and committed under its final name
(renamed in place locally, copied up through FileSystems for gs://). Content depends only on the keys,
so every runner, worker count and retry writes the same bytes.
"""

from __future__ import annotations

import dataclasses
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data.formats import SHARD_EXTENSIONS, Shard, shard_name
from dew.preprocess import files
from dew.preprocess.documents import NAMESPACE
from dew.preprocess.layout import Layout

# Documents per parquet row group: fixed, so the file layout never depends on timing.
_PARQUET_ROWS = 4096
_READ_BACK = 1 << 22


@dataclasses.dataclass(frozen=True, kw_only=True)
class ShardFormat:
    """Which file kind the shards are and what dtype their ids have."""

    ext: str
    dtype: str

    def __post_init__(self) -> None:
        if self.ext not in SHARD_EXTENSIONS:
            raise ValueError(f"shard format {self.ext!r} is not one of {', '.join(SHARD_EXTENSIONS)}")
        np.dtype(self.dtype)


def write_local(path: str, fmt: ShardFormat, documents: Iterable[np.ndarray]) -> tuple[int, int]:
    """Writes documents in order to a local shard file; returns (tokens, documents)."""
    tokens = count = 0
    if fmt.ext == "bin":
        with open(path, "wb") as f:
            for ids in documents:
                f.write(ids.tobytes())
                tokens, count = tokens + len(ids), count + 1
    elif fmt.ext == "array_record":
        from array_record.python.array_record_module import ArrayRecordWriter

        # group_size:1 keeps every record individually addressable, which random access needs.
        writer = ArrayRecordWriter(path, "group_size:1")
        try:
            for ids in documents:
                writer.write(ids.tobytes())
                tokens, count = tokens + len(ids), count + 1
        finally:
            writer.close()
    else:
        import pyarrow as pa
        import pyarrow.parquet as pq

        value = pa.from_numpy_dtype(np.dtype(fmt.dtype))
        schema = pa.schema([("tokens", pa.list_(value))])
        with pq.ParquetWriter(path, schema) as writer:
            group: list[np.ndarray] = []
            for ids in documents:
                group.append(ids)
                tokens, count = tokens + len(ids), count + 1
                if len(group) == _PARQUET_ROWS:
                    writer.write_table(_table(group, schema, value))
                    group = []
            if group or count == 0:
                writer.write_table(_table(group, schema, value))
    return tokens, count


def _table(group: list[np.ndarray], schema: Any, value: Any) -> Any:
    import pyarrow as pa

    lengths = np.fromiter((len(g) for g in group), dtype=np.int32, count=len(group))
    offsets = np.zeros(len(group) + 1, dtype=np.int32)
    np.cumsum(lengths, out=offsets[1:])
    flat = np.concatenate(group) if group else np.zeros(0, dtype=value.to_pandas_dtype())
    return pa.Table.from_arrays(
        [pa.ListArray.from_arrays(pa.array(offsets), pa.array(flat, type=value))], schema=schema
    )


class _Spill:
    """Documents parked in a local file by arrival, handed back in key order."""

    def __init__(self, directory: str, dtype: np.dtype) -> None:
        self.path = os.path.join(directory, "spill")
        self.dtype = dtype
        self.index: list[tuple[tuple[int, int], int, int]] = []
        self._file = open(self.path, "wb")  # noqa: SIM115 (closed by ordered(), which reads it back)
        self._offset = 0

    def add(self, key: tuple[int, int], ids: np.ndarray) -> None:
        data = np.ascontiguousarray(ids, dtype=self.dtype).tobytes()
        self._file.write(data)
        self.index.append((tuple(key), self._offset, len(ids)))
        self._offset += len(data)

    def ordered(self) -> Iterator[np.ndarray]:
        self._file.close()
        self.index.sort()
        for (a, _, _), (b, _, _) in zip(self.index, self.index[1:], strict=False):
            if a == b:
                raise RuntimeError(f"document key {a} reached one shard twice; the read step emitted it twice")
        itemsize = self.dtype.itemsize
        with open(self.path, "rb", buffering=_READ_BACK) as f:
            for _, offset, length in self.index:
                f.seek(offset)
                yield np.frombuffer(f.read(length * itemsize), dtype=self.dtype)


class _WriteShard(beam.DoFn):
    def __init__(self, output: str, fmt: ShardFormat) -> None:
        self.output = output
        self.fmt = fmt

    def setup(self) -> None:
        self.written = beam.metrics.Metrics.counter(NAMESPACE, "shards_written")
        self.skipped = beam.metrics.Metrics.counter(NAMESPACE, "shards_skipped")
        self.documents = beam.metrics.Metrics.counter(NAMESPACE, "pieces_written")

    def process(self, element: tuple[tuple[str, int], Iterable[Any]], layout: Layout) -> Iterator[tuple[str, Shard]]:
        (split, index), values = element
        name = shard_name(split, index, layout.shards[split], self.fmt.ext)
        final = files.join(self.output, name)
        documents = (v for v in values if v is not None)
        if files.exists(final):
            # Committed by an earlier attempt or run of this same job (the launcher checked the config):
            # its bytes are what this run would write, so only the counts are recomputed.
            tokens = count = 0
            for _, ids in documents:
                tokens, count = tokens + len(ids), count + 1
            digest, size = files.sha256_of(final)
            self.skipped.inc()
        else:
            work = tempfile.mkdtemp(prefix="dew-shard-")
            try:
                spill = _Spill(work, np.dtype(self.fmt.dtype))
                for key, ids in documents:
                    spill.add(key, ids)
                if files.is_local(self.output):
                    target = files.temp_name(self.output, name)
                    os.makedirs(os.path.dirname(target), exist_ok=True)
                else:
                    target = os.path.join(work, name)
                tokens, count = write_local(target, self.fmt, spill.ordered())
                digest, size = files.sha256_of(target)
                if files.is_local(self.output):
                    files.commit(target, final)
                else:
                    files.upload(target, final, self.output)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            self.written.inc()
        self.documents.inc(count)
        yield split, Shard(name=name, tokens=tokens, documents=count, bytes=size, sha256=digest)


class WriteShards(beam.PTransform):
    """((split, j), (key, ids)) pieces + the layout → (split, Shard) for every shard of every split.

    Every shard the layout names is written, empty ones included, so a split always has its full
    `-of-N` set.
    """

    def __init__(self, output: str, fmt: ShardFormat, layout: beam.pvalue.AsSingleton, label: str | None = None):
        super().__init__(label)
        self.output = output
        self.fmt = fmt
        self.layout = layout

    def expand(self, pieces: beam.PCollection) -> beam.PCollection:
        every = (
            pieces.pipeline
            | "One" >> beam.Create([None])
            | "EveryShard" >> beam.FlatMap(lambda _, layout: [(s, None) for s in layout.shard_ids()], self.layout)
        )
        return (
            (pieces, every)
            | "WithEmpty" >> beam.Flatten()
            | "GroupByShard" >> beam.GroupByKey()
            | "Write" >> beam.ParDo(_WriteShard(self.output, self.fmt), self.layout)
        )

"""WriteShards: grouped documents → committed shard files (.bin, ArrayRecord or parquet), one Shard each.

A shard's documents arrive from the shuffle in no particular order. They are spilled to a local file
as they come and only their keys are kept and sorted, so a worker holds 24 bytes a document rather than
the shard; the shard is then written in key order to a local file and committed under its final name
(renamed in place locally, copied up through FileSystems for gs://). Content depends only on the keys,
so every runner, worker count and retry writes the same bytes.

ArrayRecord and parquet shards are read back as pieces (records, rows), and a reader must know every
piece's length to find an offset. The writer knows them already, so it parks each shard's lengths in
the run's temporary directory, and `write_piece_indexes` joins them into `<split>.pieces.npz` at commit.
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

from dew.data import formats
from dew.data.formats import SHARD_EXTENSIONS, CorpusMeta, Shard, shard_name
from dew.data.tokens.pieces import PIECES, PieceIndex
from dew.preprocess import files
from dew.preprocess.documents import NAMESPACE
from dew.preprocess.layout import Layout

# Documents per parquet row group: fixed, so the file layout never depends on timing.
_PARQUET_ROWS = 4096
_READ_BACK = 1 << 22
TOKEN_COLUMN = "tokens"
# What a piece holds, as the piece index names it: raw id records, or the parquet column.
_PIECE_FIELDS = {"array_record": "", "parquet": TOKEN_COLUMN}


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
        schema = pa.schema([(TOKEN_COLUMN, pa.list_(value))])
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

    def lengths(self) -> np.ndarray:
        """Every document's length in key order: the order ordered() hands them back in (cheap once it has)."""
        return np.array([length for _, _, length in sorted(self.index)], dtype=np.int64)

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
            keyed = sorted((tuple(key), len(ids)) for key, ids in documents)
            lengths = np.array([length for _, length in keyed], dtype=np.int64)
            tokens, count = int(lengths.sum()), len(lengths)
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
                lengths = spill.lengths()
                digest, size = files.sha256_of(target)
                if files.is_local(self.output):
                    files.commit(target, final)
                else:
                    files.upload(target, final, self.output)
            finally:
                shutil.rmtree(work, ignore_errors=True)
            self.written.inc()
        if self.fmt.ext in _PIECE_FIELDS:
            # After the shard's commit, and on the skip path too, so a crash between the two heals on rerun.
            files.write_atomic(_lengths_path(self.output, name), lengths.astype("<i8").tobytes(), self.output)
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


def _lengths_path(output: str, name: str) -> str:
    return files.join(output, files.TEMP_DIR, f"{name}.lengths")


def write_piece_indexes(output: str, meta: CorpusMeta) -> list[str]:
    """Joins the lengths WriteShards parked into each ArrayRecord or parquet split's `<split>.pieces.npz`.

    Checked against meta.json's per-shard piece and token counts before anything is written; returns
    the splits indexed. A split of .bin shards needs no index (its offsets are byte arithmetic).
    """
    fingerprint = meta.fingerprint()
    indexed = []
    for split, shards in meta.splits.items():
        kinds = {formats.parse_shard_name(shard.name)[3] for shard in shards}
        if not shards or len(kinds) != 1 or (kind := kinds.pop()) not in _PIECE_FIELDS:
            continue
        lengths = []
        for shard in shards:
            where = _lengths_path(output, shard.name)
            if not files.exists(where):
                raise RuntimeError(f"{where} is missing: WriteShards did not record the pieces of {shard.name}")
            found = np.frombuffer(files.read_bytes(where), dtype="<i8").astype(np.int64)
            if len(found) != shard.documents or int(found.sum()) != shard.tokens:
                raise RuntimeError(
                    f"{where} records {len(found)} pieces of {int(found.sum())} tokens, but {shard.name} was "
                    f"written with {shard.documents} pieces of {shard.tokens} tokens"
                )
            lengths.append(found)
        index = PieceIndex.of_lengths(lengths, field=_PIECE_FIELDS[kind])
        final = formats.derived_path(output, split, PIECES)
        with tempfile.TemporaryDirectory(prefix="dew-pieces-") as local:
            path = os.path.join(local, os.path.basename(final))
            index.save(path, fingerprint)
            files.upload(path, final, output, replace=True)
        # Named one by one: a rerun rewrites them on its skip path, so they need not outlive the index.
        files.delete([_lengths_path(output, shard.name) for shard in shards])
        indexed.append(split)
    return indexed

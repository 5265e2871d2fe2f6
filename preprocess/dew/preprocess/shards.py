"""WriteShards: keyed records of any kind → committed shard files (.bin, ArrayRecord or parquet), one Shard each.

Every kind of record travels as bytes (token ids in the corpus dtype, or a packed dict), keyed by where
it came from, or, when records are large, as a dew.preprocess.parked.Parked reference to the file the
step that made it wrote it to. A shard's records arrive from the shuffle in no particular order. They
are spilled to a local file as they come (a parked one stays where it is) and only their keys are kept
and sorted, so a worker holds a few dozen bytes a
record rather than the shard; the shard is then written in key order through the adapter of its file
format (dew.preprocess.shard_files) and committed under its final name (renamed in place locally,
copied up through FileSystems for gs://). Content depends only on the keys, so every runner, worker
count and retry writes the same bytes.

A record-shaped shard (ArrayRecord, parquet) is read back by pieces, and a reader must know every
piece's length to find an offset. The writer knows them already, so it parks each shard's lengths in
the run's temporary directory, and the commit joins them into `<split>.pieces.npz`
(dew.preprocess.piece_lengths).
"""

from __future__ import annotations

import collections
import contextlib
import dataclasses
import math
import os
import shutil
import tempfile
from collections.abc import Iterable, Iterator, Mapping
from typing import Any

import apache_beam as beam
import numpy as np

from dew.data import formats
from dew.data.formats import Shard, shard_name
from dew.preprocess import commit, files, progress
from dew.preprocess.commit import JobIdentity
from dew.preprocess.constants import NAMESPACE, TRAIN
from dew.preprocess.job_errors import TooManyShardsError
from dew.preprocess.parked import Parked
from dew.preprocess.piece_lengths import park_lengths
from dew.preprocess.quiet import user_error
from dew.preprocess.shard_files import ShardFormat, write_shard_file

_READ_BACK = 1 << 22
# Parked files a shard writer keeps open at once.
_OPEN_PARKED = 16
Key = tuple[Any, ...]
# The progress phase shards are written in (dew.preprocess.writing's skeleton names it too).
WRITE_PHASE = "write"


def sized_count(split: str, amount: int, per_shard: int, *, flag: str = "--shard_size_mb", unit: str = "bytes") -> int:
    """How many shards hold a split of `amount` at `per_shard` each: at least one, and never more than
    formats.MAX_SHARDS. Every job that sizes its shards plans through here.

    The count is known only once the job has counted what it read, so the launcher cannot check it with
    its flags; refusing it here, as it is planned, fails before any shard is written rather than in the
    worker that would name shard 100000. `flag` and `unit` say what set `per_shard`.
    """
    count = max(1, math.ceil(amount / per_shard))
    if count > formats.MAX_SHARDS:
        fix = f"a larger {flag}" + (", or set the count with --num_shards" if split == TRAIN else "")
        raise user_error(
            TooManyShardsError(
                f"{flag} plans {count} {split} shards ({amount} {unit} at {per_shard} a shard), more than the "
                f"{formats.MAX_SHARDS} a split can have; nothing was committed. Use {fix}"
            )
        )
    return count


class _Spill:
    """Records parked in a local file by arrival (or already parked elsewhere), handed back in key order."""

    def __init__(self, directory: str, fmt: ShardFormat) -> None:
        self.path = os.path.join(directory, "spill")
        self.fmt = fmt
        self.index: list[tuple[Key, str, int, int, int]] = []  # (key, file, offset, bytes, units)
        self._file = open(self.path, "wb")  # noqa: SIM115 (closed by ordered(), which reads it back)
        self._offset = 0

    def add(self, key: Key, record: bytes | Parked) -> None:
        if isinstance(record, Parked):
            # Parked by the step that made it: only where it is needs keeping.
            self.index.append((tuple(key), record.path, record.offset, record.size, self.fmt.units(record)))
            return
        self._file.write(record)
        self.index.append((tuple(key), self.path, self._offset, len(record), self.fmt.units(record)))
        self._offset += len(record)

    def lengths(self) -> np.ndarray:
        """Every record's length in units, in key order: the order ordered() hands them back in."""
        return np.array([units for *_, units in sorted(self.index)], dtype=np.int64)

    def ordered(self) -> Iterator[bytes]:
        self._file.close()
        self.index.sort()
        for (a, *_), (b, *_) in zip(self.index, self.index[1:], strict=False):
            if a == b:
                raise RuntimeError(f"record key {a} reached one shard twice; the read step emitted it twice")
        spill = open(self.path, "rb", buffering=_READ_BACK)  # noqa: SIM115 (closed below)
        # Parked files being read, the most recently used last: records of a few files can interleave in
        # key order (images parked per bundle), and reopening a file for every record would cost more
        # than reading it, above all on gs://.
        elsewhere: collections.OrderedDict[str, Any] = collections.OrderedDict()
        try:
            for _, path, offset, size, _ in self.index:
                reader: Any
                if path == self.path:
                    reader = spill
                else:
                    reader = elsewhere.get(path)
                    if reader is None:
                        if len(elsewhere) >= _OPEN_PARKED:
                            elsewhere.popitem(last=False)[1].close()
                        reader = elsewhere[path] = files.open_read(path)
                    else:
                        elsewhere.move_to_end(path)
                reader.seek(offset)
                record = reader.read(size)
                if len(record) != size:
                    raise RuntimeError(
                        f"{path} holds {len(record)} bytes at {offset} where a record of {size} was parked: "
                        "the file was cut or replaced while the job ran; rerun the job"
                    )
                yield record
        finally:
            spill.close()
            for reader in elsewhere.values():
                reader.close()


@dataclasses.dataclass(frozen=True)
class StagedShard:
    """A shard file written under a temporary name, not yet committed: where it is and what it holds."""

    work: str  # the local scratch directory; removed once the shard is committed or abandoned
    target: str
    lengths: np.ndarray
    checksums: files.Checksums


def stage_shard(output: str, name: str, fmt: ShardFormat, records: Iterable[tuple[Key, bytes | Parked]]) -> StagedShard:
    """Writes `records` (in any order) in key order to a temporary file of shard `name`.

    Locally the file is written inside the output, so committing it is a rename; for gs:// it is written
    in a local scratch directory and uploaded at commit. A write that fails (a full disk) leaves neither,
    so no retry or rerun finds the space it needs taken by a part of a shard.
    """
    work = tempfile.mkdtemp(prefix="dew-shard-")
    target = os.path.join(work, name)
    try:
        spill = _Spill(work, fmt)
        for key, record in records:
            spill.add(key, record)
        if files.is_local(output):
            target = files.temp_name(output, name)
            os.makedirs(os.path.dirname(target), exist_ok=True)
        write_shard_file(target, fmt, spill.ordered())
        return StagedShard(
            work=work, target=target, lengths=spill.lengths(), checksums=files.checksums_of(target, name=name)
        )
    except BaseException:
        shutil.rmtree(work, ignore_errors=True)
        with contextlib.suppress(FileNotFoundError):
            os.unlink(target)
        raise


def commit_shard(
    staged: StagedShard, output: str, name: str, fmt: ShardFormat, *, claim: JobIdentity, replace: bool = False
) -> Shard:
    """Commits a staged shard under its final name and parks its piece lengths; the Shard meta.json records.

    Only while `claim` (this run) holds the output. `replace` is for a shard rewritten on purpose;
    otherwise an earlier attempt's file stays (same bytes).
    """
    final = files.join(output, name)
    try:
        commit.check_claim(output, claim)
        staged.checksums.write_blocks(final, output)
        if files.is_local(output):
            files.commit(staged.target, final, replace=replace)
        else:
            files.upload(staged.target, final, output, replace=replace)
    finally:
        shutil.rmtree(staged.work, ignore_errors=True)
    park_lengths(output, name, fmt, staged.lengths)
    return staged.checksums.shard(name, record_count=len(staged.lengths), units=int(staged.lengths.sum()))


class _WriteShard(beam.DoFn):
    def __init__(self, output: str, fmt: ShardFormat, claim: JobIdentity) -> None:
        self.output = output
        self.fmt = fmt
        self.claim = claim

    def setup(self) -> None:
        self.written = beam.metrics.Metrics.counter(NAMESPACE, "shards_written")
        self.skipped = beam.metrics.Metrics.counter(NAMESPACE, "shards_skipped")
        self.records = beam.metrics.Metrics.counter(NAMESPACE, "records_written")
        self.bytes = 0
        self.progress = progress.Tally(WRITE_PHASE, measure=lambda: self.bytes)

    def process(
        self, element: tuple[tuple[str, int], Iterable[Any]], counts: Mapping[str, int]
    ) -> Iterator[tuple[str, Shard]]:
        (split, index), values = element
        name = shard_name(split, index, counts[split], self.fmt.ext)
        final = files.join(self.output, name)
        records = self._counted(v for v in values if v is not None)
        if files.exists(final):
            # Committed by an earlier attempt or run of this same job (the launcher checked the config):
            # its bytes are what this run would write, so only the counts are recomputed.
            keyed = sorted((tuple(key), self.fmt.units(record)) for key, record in records)
            lengths = np.array([length for _, length in keyed], dtype=np.int64)
            checksums = files.checksums_of(final)
            size = checksums.size
            expected = int(lengths.sum()) * self.fmt.dtype.itemsize
            if self.fmt.ext == "bin" and size != expected:
                raise RuntimeError(
                    f"{final} was committed by an earlier run of this job but holds {size} bytes, while this "
                    f"run's records for it come to {expected}: the shard is damaged or was written from other "
                    "inputs; delete it, or rerun with --overwrite"
                )
            park_lengths(self.output, name, self.fmt, lengths)
            checksums.write_blocks(final, self.output)
            shard = checksums.shard(name, record_count=len(lengths), units=int(lengths.sum()))
            self.skipped.inc()
        else:
            staged = stage_shard(self.output, name, self.fmt, records)
            shard = commit_shard(staged, self.output, name, self.fmt, claim=self.claim)
            self.written.inc()
        self.records.inc(shard.records)
        yield split, shard

    def _counted(self, records: Iterator[tuple[Key, Any]]) -> Iterator[tuple[Key, Any]]:
        """The shard's records, each counted for the progress line as the shard takes it."""
        itemsize = self.fmt.dtype.itemsize
        for key, record in records:
            self.bytes += self.fmt.units(record) * itemsize
            self.progress.add()
            yield key, record

    def finish_bundle(self) -> None:
        self.progress.publish()


class GroupByShard(beam.PTransform):
    """((split, j), value) → ((split, j), [values]) for every shard `counts` names, empty ones included.

    `counts` is a singleton side input mapping each split to its shard count, so a split always has its
    full `-of-N` set; an empty shard's values hold only None.
    """

    def __init__(self, counts: beam.pvalue.AsSingleton, label: str | None = None):
        super().__init__(label)
        self.counts = counts

    def expand(self, pieces: beam.PCollection) -> beam.PCollection:
        every = pieces.pipeline | "One" >> beam.Create([None]) | "EveryShard" >> beam.FlatMap(_every_shard, self.counts)
        return (pieces, every) | "WithEmpty" >> beam.Flatten() | "GroupByShard" >> beam.GroupByKey()


class WriteShards(beam.PTransform):
    """((split, j), (key, record bytes)) + the shards to write → (split, Shard) for every shard of every split.

    `counts` is a singleton side input mapping each split to its shard count: every shard it names is
    written, empty ones included, so a split always has its full `-of-N` set. `claim` is the run's
    identity: a shard is committed only while it holds the output.
    """

    def __init__(
        self,
        output: str,
        fmt: ShardFormat,
        counts: beam.pvalue.AsSingleton,
        claim: JobIdentity,
        label: str | None = None,
    ):
        super().__init__(label)
        self.output = output
        self.fmt = fmt
        self.counts = counts
        self.claim = claim

    def expand(self, pieces: beam.PCollection) -> beam.PCollection:
        return (
            pieces
            | "Group" >> GroupByShard(self.counts)
            | "Write" >> beam.ParDo(_WriteShard(self.output, self.fmt, self.claim), self.counts)
        )


def _every_shard(_: object, counts: Mapping[str, int]) -> list[tuple[tuple[str, int], None]]:
    return [((split, j), None) for split, count in sorted(counts.items()) for j in range(count)]

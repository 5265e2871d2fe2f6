"""ReadDocuments: raw text documents out of jsonl(.gz/.zst), txt and parquet files, keyed by (file, row).

The key is the document's place in the corpus: the file's index in the sorted input list and the row
(line or parquet row) inside it. Every later step orders by that key, never by arrival, which is what
makes the shards the same bytes on any runner.

Bad input never stops the job unless asked to (`strict`): each dropped row is counted under its reason,
and the per-file tallies travel as a second output so the job can check documents in = written + dropped.

How a file's bytes become rows is dew.preprocess.document_rows (DocumentRows), which inspect reads
a removed document back through, without Beam. A file is read to its verified end. A file that breaks
off or goes wrong keeps the rows read before the damage — each was decoded and parsed whole, so it is a
real document of the corpus; a truncation loses only what follows — and the lost rest is dropped under
truncated_input or corrupt_input: as its exact row count when the file records one (parquet's footer),
otherwise as one entry, since nobody can tell how many documents a lost tail held. Damage found only at
the end (a gzip CRC) cannot un-emit the rows already read; --strict refuses such a file outright. A file
that cannot be opened at all is no bad data but a missing or unreachable input: it fails the job, since
counting a transient error would make the output depend on it.
"""

from __future__ import annotations

import collections
import logging
import operator
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam

from dew.data.formats import Shard
from dew.preprocess import files, progress
from dew.preprocess.constants import DAMAGED, NAMESPACE, STATS_TAG
from dew.preprocess.document_rows import (
    CORRUPT_INPUT,
    ROW_REASONS,
    TRUNCATED_INPUT,
    DamagedInput,
    DocumentRows,
    ReadOptions,
    Row,
)
from dew.preprocess.job_errors import BadInputError
from dew.preprocess.quiet import user_error

# Reasons the rest of a file is lost; their count is that rest's rows when known, else one a file.
FILE_REASONS = (TRUNCATED_INPUT, CORRUPT_INPUT, files.DANGLING_SYMLINK, files.SYMLINK_LOOP)
DROP_REASONS = ROW_REASONS + FILE_REASONS
UNREADABLE_FILE = "unreadable_file"
# The progress phase of reading documents, measured in input bytes (a file's row count is unknown ahead).
READ = "read"
# Per-file tally entry: the first row dropped for each reason ({"path", "row"}), so a job that drops
# too much can show where to look.
EXAMPLES = "drop_examples"
_PLACE = operator.itemgetter("path", "row")  # where a drop example is: the first in path order is shown


class _ReadFile(beam.DoFn):
    """One input file → its documents, plus one tally of what it held."""

    def __init__(self, options: ReadOptions, committed: Mapping[str, Shard] | None = None) -> None:
        self.options = options
        self.committed = dict(committed or {})
        self.counters: dict[str, Any] = {}

    def setup(self) -> None:
        names = ("documents_in", "documents_read", *DROP_REASONS)
        self.counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name) for name in names}
        self.counters["files"] = beam.metrics.Metrics.counter(NAMESPACE, "files")
        self.counters[UNREADABLE_FILE] = beam.metrics.Metrics.counter(NAMESPACE, "files_unreadable")
        self._read_before = 0  # input bytes of the files this worker has finished
        self._raw: Any = None  # the file being read, whose position is how far into it the reading is
        self.progress = progress.Tally(READ, measure=self._bytes_read)

    def _bytes_read(self) -> int:
        try:
            return self._read_before + (self._raw.tell() if self._raw is not None and not self._raw.closed else 0)
        except (OSError, ValueError):
            return self._read_before

    def process(self, element: tuple[int, str]) -> Iterator[Any]:
        index, path = element
        tally: collections.Counter[str] = collections.Counter()
        damaged: list[dict[str, Any]] = []
        examples: dict[str, dict[str, Any]] = {}
        self.counters["files"].inc()
        try:
            for row, text, reason in self._rows(path):
                tally["documents_in"] += 1
                if reason is None:
                    self.progress.add()
                    tally["documents_read"] += 1
                    yield (index, row), text
                else:
                    tally[reason] += 1
                    examples.setdefault(reason, {"path": path, "row": row})
                    if self.options.strict:
                        raise user_error(
                            BadInputError(
                                f"{path}: row {row}: {reason.replace('_', ' ')}; rerun without --strict to count it"
                            )
                        )
        except DamagedInput as damage:
            rows = tally["documents_in"]
            what = f"{path}: {damage.reason.replace('_', ' ')} after {rows} rows ({damage})"
            if self.options.strict:
                raise user_error(
                    BadInputError(f"{what}; rerun without --strict to keep those rows and count the rest")
                ) from None
            logging.warning("%s; the rest of the file is counted as dropped", what)
            tally["documents_in"] += damage.lost
            tally[damage.reason] += damage.lost
            tally[UNREADABLE_FILE] += 1
            examples.setdefault(damage.reason, {"path": path, "row": rows})
            damaged.append({"path": path, "reason": damage.reason, "rows_read": rows, "error": str(damage)})
        for name, value in tally.items():
            self.counters[name].inc(value)
        self.progress.publish()
        yield beam.pvalue.TaggedOutput(STATS_TAG, {**tally, DAMAGED: damaged, EXAMPLES: examples})

    def _rows(self, path: str) -> Iterator[Row]:
        rows = DocumentRows(path, self.options)  # an unknown file kind is refused before the file opens
        if problem := files.link_problem(path):
            raise DamagedInput(problem, "the symlink leads to no file")
        shard = self.committed.get(path)  # a committed shard: its bytes are checked before one row is read
        with files.open_read(path if shard is None else files.verified(path, shard)) as raw:
            self._raw = raw
            try:
                yield from rows.read(raw)
            finally:
                self._read_before, self._raw = self._bytes_read(), None


class ReadDocuments(beam.PTransform):
    """PCollection[(file index, path)] → documents ((file index, row), text), and per-file tallies.

    Apply it to `beam.Create(list(enumerate(paths)))`; the result is a DoOutputsTuple whose main output
    is the documents and whose `stats` output holds one dict of counts per file. `committed` maps the paths
    that are shards of a committed directory to their meta.json entries, which each is checked against.
    """

    def __init__(self, options: ReadOptions, committed: Mapping[str, Shard] | None = None, label: str | None = None):
        super().__init__(label)
        self.options, self.committed = options, dict(committed or {})

    def expand(self, paths: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        # Reshuffle spreads the files over workers; the keys, not the order, carry the corpus order.
        read = beam.ParDo(_ReadFile(self.options, self.committed)).with_outputs(STATS_TAG, main="documents")
        return paths | "SpreadFiles" >> beam.Reshuffle() | "ReadFile" >> read


def merge_tallies(tallies: Any) -> dict[str, Any]:
    """Sums per-file tallies into one, every reason present (zero when nothing was dropped for it).

    `damaged_inputs` lists every file that could not be read to its end, by path; `drop_examples` holds,
    for each reason that dropped anything, its first row in path order (whatever order tallies came in).
    """
    total: collections.Counter[str] = collections.Counter()
    damaged: list[dict[str, Any]] = []
    examples: dict[str, dict[str, Any]] = {}
    for tally in tallies:
        damaged.extend(tally.get(DAMAGED, ()))
        for reason, example in tally.get(EXAMPLES, {}).items():
            if reason not in examples or _PLACE(example) < _PLACE(examples[reason]):
                examples[reason] = example
        total.update({name: value for name, value in tally.items() if name not in (DAMAGED, EXAMPLES)})
    names = ("documents_in", "documents_read", *DROP_REASONS)
    result: dict[str, Any] = {name: int(total.get(name, 0)) for name in names}
    result["files_unreadable"] = int(total.get(UNREADABLE_FILE, 0))
    result[DAMAGED] = sorted(damaged, key=lambda d: d["path"])
    result[EXAMPLES] = dict(sorted(examples.items()))
    return result

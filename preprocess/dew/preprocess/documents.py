"""ReadDocuments: raw text documents out of jsonl(.gz/.zst), txt and parquet files, keyed by (file, row).

The key is the document's place in the corpus: the file's index in the sorted input list and the row
(line or parquet row) inside it. Every later step orders by that key, never by arrival, which is what
makes the shards the same bytes on any runner.

Bad input never stops the job unless asked to (`strict`): each dropped row is counted under its reason,
and the per-file tallies travel as a second output so the job can check documents in = written + dropped.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import io
import json
from collections.abc import Iterator
from typing import Any

import apache_beam as beam

from dew.data.extras import require
from dew.preprocess import files

STATS_TAG = "stats"
# Reasons a row is dropped; a counter and a stats.json entry each.
INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
MISSING_FIELD = "missing_field"
EMPTY = "empty"
TOO_LONG = "too_long"
UNREADABLE_FILE = "unreadable_file"
DROP_REASONS = (INVALID_UTF8, MALFORMED_JSON, MISSING_FIELD, EMPTY, TOO_LONG)
NAMESPACE = "dew.preprocess"


class BadInputError(ValueError):
    """Raised in strict mode, naming the file, row and reason of the first bad document."""


@dataclasses.dataclass(frozen=True, kw_only=True)
class ReadOptions:
    """How input files turn into documents.

    text_field: the JSON key or parquet column holding the text.
    txt_documents: "file" makes a whole .txt file one document, "line" one document per line.
    max_document_bytes: a longer document (a huge line, say) is dropped as too_long without being held.
    strict: raise on the first bad document instead of counting it.
    """

    text_field: str = "text"
    txt_documents: str = "file"
    max_document_bytes: int = 64 << 20
    strict: bool = False

    def __post_init__(self) -> None:
        if not self.text_field:
            raise ValueError("text_field must name a JSON key or parquet column")
        if self.txt_documents not in ("file", "line"):
            raise ValueError(f"txt_documents must be 'file' or 'line', got {self.txt_documents!r}")
        if self.max_document_bytes < 1:
            raise ValueError(f"max_document_bytes must be positive, got {self.max_document_bytes}")


def kind_of(path: str) -> tuple[str, str]:
    """(format, compression) from the file name: jsonl/txt/parquet and none/gzip/zstd."""
    name = path.lower()
    compression = "none"
    for suffix, kind in ((".gz", "gzip"), (".zst", "zstd"), (".zstd", "zstd")):
        if name.endswith(suffix):
            name, compression = name[: -len(suffix)], kind
    for suffix, kind in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".txt", "txt")):
        if name.endswith(suffix):
            return kind, compression
    if name.endswith(".parquet") and compression == "none":
        return "parquet", compression
    raise ValueError(f"{path}: cannot tell the format from the name; expected .jsonl, .txt or .parquet (+ .gz/.zst)")


def _decompressed(raw: Any, compression: str) -> Any:
    if compression == "gzip":
        return io.BufferedReader(gzip.GzipFile(fileobj=raw))
    if compression == "zstd":
        import zstandard

        return io.BufferedReader(zstandard.ZstdDecompressor().stream_reader(raw, read_across_frames=True))
    return raw


class _ReadFile(beam.DoFn):
    """One input file → its documents, plus one tally of what it held."""

    def __init__(self, options: ReadOptions) -> None:
        self.options = options
        self.counters: dict[str, Any] = {}

    def setup(self) -> None:
        names = ("documents_in", "documents_read", INVALID_UTF8, MALFORMED_JSON, MISSING_FIELD, EMPTY, TOO_LONG)
        self.counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name) for name in names}
        self.counters["files"] = beam.metrics.Metrics.counter(NAMESPACE, "files")
        self.counters[UNREADABLE_FILE] = beam.metrics.Metrics.counter(NAMESPACE, "files_unreadable")

    def process(self, element: tuple[int, str]) -> Iterator[Any]:
        index, path = element
        tally: collections.Counter[str] = collections.Counter()
        self.counters["files"].inc()
        try:
            for row, text, reason in self._rows(path):
                tally["documents_in"] += 1
                if reason is None:
                    tally["documents_read"] += 1
                    yield (index, row), text
                else:
                    tally[reason] += 1
                    if self.options.strict:
                        raise BadInputError(
                            f"{path}: row {row}: {reason.replace('_', ' ')}; rerun without --strict to count it"
                        )
        except BadInputError:
            raise
        except (OSError, EOFError, ValueError) as error:
            # A file that cannot be opened, or that breaks off mid-stream: the rows before stay, in order.
            if self.options.strict:
                raise BadInputError(f"{path}: unreadable: {error}") from error
            tally[UNREADABLE_FILE] += 1
        for name, value in tally.items():
            self.counters[name].inc(value)
        yield beam.pvalue.TaggedOutput(STATS_TAG, dict(tally))

    def _rows(self, path: str) -> Iterator[tuple[int, str | None, str | None]]:
        kind, compression = kind_of(path)
        with files.open_read(path) as raw:
            if kind == "parquet":
                yield from self._parquet_rows(raw)
                return
            stream = _decompressed(raw, compression)
            if kind == "txt" and self.options.txt_documents == "file":
                data = stream.read(self.options.max_document_bytes + 1)
                yield (0, *self._text(data))
                return
            for row, line in enumerate(self._lines(stream)):
                if line is None:
                    yield row, None, TOO_LONG
                elif kind == "txt":
                    yield (row, *self._text(line.rstrip(b"\r\n")))
                else:
                    yield (row, *self._json(line))

    def _lines(self, stream: Any) -> Iterator[bytes | None]:
        """Lines of at most max_document_bytes; None stands for a longer one, skipped in bounded reads."""
        limit = self.options.max_document_bytes + 2  # room for "\r\n"
        while line := stream.readline(limit):
            if len(line) == limit and not line.endswith(b"\n"):
                while (rest := stream.readline(limit)) and not rest.endswith(b"\n"):
                    pass
                yield None
            else:
                yield line

    def _text(self, data: bytes) -> tuple[str | None, str | None]:
        if len(data) > self.options.max_document_bytes:
            return None, TOO_LONG
        try:
            text = data.decode("utf-8")
        except UnicodeDecodeError:
            return None, INVALID_UTF8
        return (text, None) if text else (None, EMPTY)

    def _json(self, line: bytes) -> tuple[str | None, str | None]:
        if not line.strip():
            return None, EMPTY
        try:
            record = json.loads(line.decode("utf-8"))
        except UnicodeDecodeError:
            return None, INVALID_UTF8
        except ValueError:
            return None, MALFORMED_JSON
        text = record.get(self.options.text_field) if isinstance(record, dict) else None
        return self._checked(text)

    def _checked(self, text: Any) -> tuple[str | None, str | None]:
        if not isinstance(text, str):
            return None, MISSING_FIELD
        if not text:
            return None, EMPTY
        try:
            size = len(text.encode("utf-8"))
        except UnicodeEncodeError:  # lone surrogates from a JSON "\ud800" escape
            return None, INVALID_UTF8
        return (text, None) if size <= self.options.max_document_bytes else (None, TOO_LONG)

    def _parquet_rows(self, raw: Any) -> Iterator[tuple[int, str | None, str | None]]:
        table = require("pyarrow.parquet", for_what="reading parquet documents").ParquetFile(raw)
        field = self.options.text_field
        if field not in table.schema_arrow.names:
            for row in range(table.metadata.num_rows):
                yield row, None, MISSING_FIELD
            return
        row = 0
        for batch in table.iter_batches(columns=[field], batch_size=1024):
            for value in batch.column(0).to_pylist():
                yield (row, *self._checked(value))
                row += 1


class ReadDocuments(beam.PTransform):
    """PCollection[(file index, path)] → documents ((file index, row), text), and per-file tallies.

    Apply it to `beam.Create(list(enumerate(paths)))`; the result is a DoOutputsTuple whose main output
    is the documents and whose `stats` output holds one dict of counts per file.
    """

    def __init__(self, options: ReadOptions, label: str | None = None) -> None:
        super().__init__(label)
        self.options = options

    def expand(self, paths: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        # Reshuffle spreads the files over workers; the keys, not the order, carry the corpus order.
        return (
            paths
            | "SpreadFiles" >> beam.Reshuffle()
            | "ReadFile" >> beam.ParDo(_ReadFile(self.options)).with_outputs(STATS_TAG, main="documents")
        )


def merge_tallies(tallies: Any) -> dict[str, int]:
    """Sums per-file tallies into one, every reason present (zero when nothing was dropped for it)."""
    total: collections.Counter[str] = collections.Counter()
    for tally in tallies:
        total.update(tally)
    names = ("documents_in", "documents_read", INVALID_UTF8, MALFORMED_JSON, MISSING_FIELD, EMPTY, TOO_LONG)
    result = {name: int(total.get(name, 0)) for name in names}
    result["files_unreadable"] = int(total.get(UNREADABLE_FILE, 0))
    return result

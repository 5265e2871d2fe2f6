"""ReadDocuments: raw text documents out of jsonl(.gz/.zst), txt and parquet files, keyed by (file, row).

The key is the document's place in the corpus: the file's index in the sorted input list and the row
(line or parquet row) inside it. Every later step orders by that key, never by arrival, which is what
makes the shards the same bytes on any runner.

Bad input never stops the job unless asked to (`strict`): each dropped row is counted under its reason,
and the per-file tallies travel as a second output so the job can check documents in = written + dropped.

A file is read to its verified end: a compressed stream must close its last frame (zstd) or member
(gzip, whose CRC and length are checked), a parquet file must carry its footer and decode every row
group. A file that breaks off or goes wrong keeps the rows read before the damage — each was decoded and
parsed whole, so it is a real document of the corpus; a truncation loses only what follows — and the lost
rest is dropped under truncated_input or corrupt_input: as its exact row count when the file records one
(parquet's footer), otherwise as one entry, since nobody can tell how many documents a lost tail held.
Damage found only at the end (a gzip CRC) cannot un-emit the rows already read; --strict refuses such a
file outright. A file that cannot be opened at all is no bad data but a missing or unreachable input: it
fails the job, since counting a transient error would make the output depend on it.
"""

from __future__ import annotations

import collections
import dataclasses
import gzip
import io
import json
import logging
import operator
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam

from dew.data.extras import require
from dew.data.formats import Shard
from dew.preprocess import files, progress
from dew.preprocess.constants import DAMAGED, NAMESPACE, STATS_TAG
from dew.preprocess.job_errors import BadInputError
from dew.preprocess.quiet import user_error

# Reasons a row is dropped; a counter and a stats.json entry each.
INVALID_UTF8 = "invalid_utf8"
MALFORMED_JSON = "malformed_json"
MISSING_FIELD = "missing_field"
EMPTY = "empty"
TOO_LONG = "too_long"
ROW_REASONS = (INVALID_UTF8, MALFORMED_JSON, MISSING_FIELD, EMPTY, TOO_LONG)
# Reasons the rest of a file is lost; their count is that rest's rows when known, else one a file.
TRUNCATED_INPUT = "truncated_input"
CORRUPT_INPUT = "corrupt_input"
FILE_REASONS = (TRUNCATED_INPUT, CORRUPT_INPUT, files.DANGLING_SYMLINK, files.SYMLINK_LOOP)
DROP_REASONS = ROW_REASONS + FILE_REASONS
UNREADABLE_FILE = "unreadable_file"
# The progress phase of reading documents, measured in input bytes (a file's row count is unknown ahead).
READ = "read"
# Per-file tally entry: the first row dropped for each reason ({"path", "row"}), so a job that drops
# too much can show where to look.
EXAMPLES = "drop_examples"
# Compressed bytes handed to the zstd decoder at once: one call inflates at most this times the ratio.
_ZSTD_FEED = 1 << 13
# Bytes read at once from a file whose contents are only being checked or decoded, not held.
_READ_CHUNK = 1 << 20
_PLACE = operator.itemgetter("path", "row")  # where a drop example is: the first in path order is shown


class DamagedInput(Exception):
    """A file's bytes end early or go wrong: what follows in it is lost (`lost` rows, when known)."""

    def __init__(self, reason: str, detail: str, lost: int = 1) -> None:
        super().__init__(detail)
        self.reason = reason
        self.lost = lost


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


class _ZstdFrames(io.RawIOBase):
    """Every zstd frame of a stream in turn, refusing a stream that stops inside one.

    zstandard's stream_reader (read_across_frames or not) and read_to_iter report a cut frame as a clean
    end of data, which loses the rest of the file without a trace; the decompression object says whether
    its frame ended (`eof`), so frames are decoded one object each. The cut can only be seen inside a
    frame: a file of several frames cut exactly between two reads as a shorter, whole file.
    """

    def __init__(self, raw: Any) -> None:
        import zstandard

        self._raw = raw
        self._decompressor = zstandard.ZstdDecompressor()
        self._error = zstandard.ZstdError
        self._frame: Any = None
        self._input = memoryview(b"")
        self._output = memoryview(b"")

    def readable(self) -> bool:
        return True

    def readinto(self, buffer: Any) -> int:
        while not self._output:
            if not self._decode():
                return 0
        n = min(len(buffer), len(self._output))
        buffer[:n] = self._output[:n]
        self._output = self._output[n:]
        return n

    def _decode(self) -> bool:
        """Decodes the next slice of input; False once the input ends where a frame ended."""
        if not self._input:
            self._input = memoryview(self._raw.read(_READ_CHUNK))
            if not self._input:
                if self._frame is not None:
                    raise EOFError("zstd stream ended inside a frame")
                return False
        if self._frame is None:
            self._frame = self._decompressor.decompressobj()
        piece, self._input = self._input[:_ZSTD_FEED], self._input[_ZSTD_FEED:]
        try:
            self._output = memoryview(self._frame.decompress(piece))
        except self._error as error:
            raise DamagedInput(CORRUPT_INPUT, f"zstd: {error}") from error
        if self._frame.eof:
            self._input = memoryview(self._frame.unused_data + self._input.tobytes())
            self._frame = None
        return True


def _decompressed(raw: Any, compression: str) -> Any:
    if compression == "gzip":
        return io.BufferedReader(gzip.GzipFile(fileobj=raw))
    if compression == "zstd":
        return io.BufferedReader(_ZstdFrames(raw))
    return raw


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

    def _rows(self, path: str) -> Iterator[tuple[int, str | None, str | None]]:
        kind, compression = kind_of(path)
        if problem := files.link_problem(path):
            raise DamagedInput(problem, "the symlink leads to no file")
        shard = self.committed.get(path)  # a committed shard: its bytes are checked before one row is read
        with files.open_read(path if shard is None else files.verified(path, shard)) as raw:
            self._raw = raw
            try:
                if kind == "parquet":
                    yield from self._parquet_rows(raw)
                    return
                try:
                    yield from self._stream_rows(_decompressed(raw, compression), kind)
                except EOFError as error:  # gzip's and _ZstdFrames' word for a stream cut before its end marker
                    raise DamagedInput(TRUNCATED_INPUT, f"{compression}: {error}") from error
                except (gzip.BadGzipFile, zlib.error) as error:  # not gzip, bad deflate data, CRC or length mismatch
                    raise DamagedInput(CORRUPT_INPUT, f"gzip: {error}") from error
            finally:
                self._read_before, self._raw = self._bytes_read(), None

    def _stream_rows(self, stream: Any, kind: str) -> Iterator[tuple[int, str | None, str | None]]:
        if kind == "txt" and self.options.txt_documents == "file":
            data = files.without_bom(stream.read(self.options.max_document_bytes + 1))
            while stream.read(_READ_CHUNK):
                pass  # a document too long to hold is still read to the end, to verify the stream
            yield (0, *self._text(data))
            return
        for row, line in enumerate(self._lines(stream)):
            if row == 0 and line is not None:
                line = files.without_bom(line)
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
        if isinstance(text, bytes):  # a binary column: a documents shard's, UTF-8 by its contract
            try:
                text = text.decode("utf-8")
            except UnicodeDecodeError:
                return None, INVALID_UTF8
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
        pa = require("pyarrow", for_what="reading parquet documents")
        pq = require("pyarrow.parquet", for_what="reading parquet documents")

        try:
            table = pq.ParquetFile(raw)
        except (pa.ArrowException, OSError) as error:
            # The footer is written last, so a file that starts as parquet but lacks its end was cut short.
            reason = TRUNCATED_INPUT if _magic(raw, 0) and not _magic(raw, -4) else CORRUPT_INPUT
            raise DamagedInput(reason, f"parquet: {error}") from error
        rows = table.metadata.num_rows
        field = self.options.text_field
        if field not in table.schema_arrow.names:
            for row in range(rows):
                yield row, None, MISSING_FIELD
            return
        row = 0
        try:
            # One row group at a time, so the groups before a damaged one are read in full.
            for group in range(table.num_row_groups):
                for batch in table.iter_batches(columns=[field], batch_size=1024, row_groups=[group]):
                    for value in batch.column(0).to_pylist():
                        yield (row, *self._checked(value))
                        row += 1
        except (pa.ArrowException, OSError) as error:
            raise DamagedInput(CORRUPT_INPUT, f"parquet: {error}", lost=max(1, rows - row)) from error


def _magic(raw: Any, offset: int) -> bool:
    """Whether parquet's magic "PAR1" sits at `offset` (negative: from the end) of a seekable file."""
    try:
        raw.seek(offset, io.SEEK_SET if offset >= 0 else io.SEEK_END)
    except (OSError, ValueError):
        return False  # a file shorter than the magic
    return raw.read(4) == b"PAR1"


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

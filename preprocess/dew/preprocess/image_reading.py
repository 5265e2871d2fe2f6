"""ReadImages: Sources → undecoded images with their other fields, keyed by (file index, row).

Nothing is decoded here: an image travels as the bytes it was stored as (a file's bytes, a parquet or
Arrow binary cell, the `bytes` of an HF `Image` struct, never a PIL image re-encoded), and its caption
and extra fields as UTF-8 bytes in the order the record will hold them. A row that names its image by
path (relative to the row file's directory, or absolute, or gs://) is read from there.

Bad input is counted by reason, as the text reader does (dew.preprocess.read_documents): a row without an
image, caption or extra field is `missing_field` (so is a caption that is not text, and an extra field
that is a list or a dict), a caption that is not UTF-8 `invalid_utf8`, a jsonl
line that is not JSON `malformed_json`, an image path leading nowhere (or an image file gone by the time
it is read) `missing_image`, one naming a
directory, pipe or device `not_a_file` (never opened: a pipe could be read forever), a url no file
system serves (http://, https://: fetch those with `dew-preprocess ingest-urls`) `remote_path`, a file
of an image folder in a format dew does not read `unsupported_format` (unopened), one whose path is
not UTF-8 `non_utf8_name` (see image_sources), a local file (image, sidecar or row file) the job
may not open `unreadable`. A `file://` url is read as the local path it names
(RFC 8089: percent-escapes decoded; a host other than localhost is `remote_path`). A row file that
breaks off keeps the rows read before the damage and counts the rest under `truncated_input` or
`corrupt_input`. Each read unit's tally travels as a second output, so the job can balance its books.
"""

from __future__ import annotations

import collections
import dataclasses
import json
import os
import posixpath
import unicodedata
import urllib.parse
from collections.abc import Iterator, Mapping
from typing import Any

import apache_beam as beam

from dew.data.extras import require
from dew.preprocess import files
from dew.preprocess.constants import DAMAGED, NAMESPACE, STATS_TAG
from dew.preprocess.csv_rows import MALFORMED_CSV
from dew.preprocess.document_rows import (
    CORRUPT_INPUT,
    INVALID_UTF8,
    MALFORMED_JSON,
    MAX_ROW_BYTES,
    MISSING_FIELD,
    TOO_LONG,
    TRUNCATED_INPUT,
    DamagedInput,
    bounded_lines,
    compression_of,
    decompressed,
    without_bom,
)
from dew.preprocess.image_sources import LABEL, NON_UTF8_NAME, UNSUPPORTED, Source

MISSING_IMAGE = "missing_image"
UNSUPPORTED_FORMAT = "unsupported_format"
NOT_A_FILE = "not_a_file"
REMOTE_PATH = "remote_path"
UNREADABLE = "unreadable"
ROW_REASONS = (MISSING_FIELD, INVALID_UTF8, MALFORMED_JSON, MISSING_IMAGE)
FILE_REASONS = (TRUNCATED_INPUT, CORRUPT_INPUT, files.DANGLING_SYMLINK, files.SYMLINK_LOOP, UNSUPPORTED_FORMAT)
# Reasons counted since stats.json listed the ones above: stats.json names them only once one is counted,
# so the stats of a run without such input stay what they were, byte for byte.
# malformed_csv: a url list's csv row (url_reading), counted with this reader's tallies.
NEWER_REASONS = (NOT_A_FILE, REMOTE_PATH, NON_UTF8_NAME, UNREADABLE, TOO_LONG, MALFORMED_CSV)
# Rows of a saved HF dataset taken from Arrow at once.
_HF_ROWS = 256
Fields = dict[str, bytes]
Reason = str | None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageReadOptions:
    """How inputs become (image, caption, extras).

    image_field / caption_field: the row column or key of the image and caption (rows and HF inputs).
    extra_fields: more row columns passed through to every record, as UTF-8 text (raw bytes stay bytes).
    caption_template: an image file's caption, with {label} (its class directory) and {stem} filled in.
    sidecar: an image file's caption is the text of `<stem>.txt` beside it instead; without one it is dropped.
    """

    image_field: str = "image"
    caption_field: str = "caption"
    extra_fields: tuple[str, ...] = ()
    caption_template: str = "{label}"
    sidecar: bool = False

    def __post_init__(self) -> None:
        named = (self.image_field, self.caption_field, *self.extra_fields)
        if not all(named) or len(set(named)) != len(named):
            raise ValueError(f"image, caption and extra fields must be distinct non-empty names, got {list(named)}")
        if LABEL in self.extra_fields:
            raise ValueError(f"{LABEL!r} is the ImageFolder class field; name the row column otherwise")
        try:
            self.caption_template.format(label="", stem="")
        except (KeyError, IndexError, ValueError) as error:
            raise ValueError(
                f"--caption_template {self.caption_template!r} can name only {{label}} and {{stem}} ({error!r})"
            ) from None


def utf8_field(value: Any, *, text_only: bool = False) -> tuple[bytes | None, Reason]:
    """A field's UTF-8 bytes, or why the row is dropped.

    A caption (`text_only`) must be text, as tokenize's text field must: a number in its place is a
    wrong column, not a caption. Other fields may be scalars (a score, a flag), kept as their text; a
    list or a dict would be kept as Python's spelling of it, which nothing reads back, so it is missing.
    """
    if isinstance(value, (list, tuple, dict)) or (text_only and not isinstance(value, (str, bytes))):
        return None, MISSING_FIELD
    if isinstance(value, bytes):
        try:
            value.decode("utf-8")
        except UnicodeDecodeError:
            return None, INVALID_UTF8
        return value, None
    if value is None:
        return None, MISSING_FIELD
    try:
        return str(value).encode("utf-8"), None
    except UnicodeEncodeError:  # lone surrogates from a JSON "\ud800" escape
        return None, INVALID_UTF8


class Unreadable(Exception):
    """A local file the job may not open (its permissions): counted as `unreadable`, never read."""


class Vanished(Exception):
    """A local file gone by the time it is opened (deleted or moved after it was listed or checked)."""


def read_file(path: str) -> bytes:
    """A file's bytes; Unreadable for a local file whose permissions refuse the job, Vanished for one
    no longer there. Other errors (a bucket's) stay errors: a transient one must fail the run, never
    drop the file as if it were bad."""
    try:
        return files.read_bytes(path)
    except PermissionError as error:
        if not files.is_local(path):
            raise
        raise Unreadable(str(error)) from None
    except (FileNotFoundError, NotADirectoryError) as error:
        if not files.is_local(path):
            raise
        raise Vanished(str(error)) from None


def _image_path(image: str, base: str) -> tuple[str, Reason]:
    """The file a row's image path names (relative to the row file's directory `base`), or why it is dropped."""
    if image.startswith("file:"):
        parts = urllib.parse.urlsplit(image)
        if parts.netloc not in ("", "localhost"):
            return image, REMOTE_PATH
        image = urllib.parse.unquote(parts.path)
    elif "://" in image and not files.has_filesystem(image):
        return image, REMOTE_PATH
    path = image if "://" in image or posixpath.isabs(image) else posixpath.join(base, image)
    if not files.exists(path):
        return path, MISSING_IMAGE
    if not files.is_regular_file(path):
        return path, NOT_A_FILE
    return path, None


class ReadSource(beam.DoFn):
    def __init__(self, options: ImageReadOptions) -> None:
        self.options = options
        self.counters: dict[str, Any] = {}

    def setup(self) -> None:
        names = ("images_in", *ROW_REASONS, *FILE_REASONS, *NEWER_REASONS)
        self.counters = {name: beam.metrics.Metrics.counter(NAMESPACE, name) for name in names}

    def process(self, unit: tuple[Source, ...]) -> Iterator[Any]:
        """Every record of a read unit (image_sources.reads), then one tally of all its files: the sum of
        theirs, each damaged file named on its own."""
        tally: collections.Counter[str] = collections.Counter()
        damaged: list[dict[str, Any]] = []
        for source in unit:
            try:
                for row, image, fields, reason in self._rows(source):
                    tally["images_in"] += 1
                    if reason is None:
                        yield (source.index, row), (image, fields, source.draw(row))
                    else:
                        tally[reason] += 1
            except DamagedInput as damage:
                tally["images_in"] += damage.lost
                tally[damage.reason] += damage.lost
                path = files.shown_path(source.path)
                damaged.append({"path": path, "reason": damage.reason, "error": str(damage)})
        for name, value in tally.items():
            self.counters[name].inc(value)
        yield beam.pvalue.TaggedOutput(STATS_TAG, {**tally, DAMAGED: damaged})

    def _rows(self, source: Source) -> Iterator[tuple[int, bytes | None, Fields, Reason]]:
        if problem := files.link_problem(source.path):
            raise DamagedInput(problem, "the symlink leads to no file")
        if source.kind in ("jsonl", "parquet") and files.is_local(source.path) and not os.access(source.path, os.R_OK):
            if not os.path.lexists(source.path):
                raise DamagedInput(UNREADABLE, "the file is gone: it was removed or renamed after the job listed it")
            raise DamagedInput(UNREADABLE, "the job may not read the file (its permissions)")
        if source.kind in (UNSUPPORTED, NON_UTF8_NAME):
            yield 0, None, {}, UNSUPPORTED_FORMAT if source.kind == UNSUPPORTED else NON_UTF8_NAME
        elif source.kind == "image":
            yield (0, *self._image_file(source))
        elif source.kind == "hf":
            yield from self._hf_rows(source)
        else:
            base = posixpath.dirname(source.path)
            rows = self._parquet_rows(source) if source.kind == "parquet" else self._jsonl_rows(source)
            for row, values, reason in rows:
                yield (row, *self._row(values, base)) if reason is None else (row, None, {}, reason)

    def _image_file(self, source: Source) -> tuple[bytes | None, Fields, Reason]:
        stem = posixpath.splitext(posixpath.basename(source.path))[0]
        if self.options.sidecar:
            sidecar = posixpath.join(posixpath.dirname(source.path), f"{stem}.txt")
            if not files.exists(sidecar):
                return None, {}, MISSING_FIELD
            try:
                caption, reason = utf8_field(without_bom(read_file(sidecar)).strip())
            except Unreadable:
                return None, {}, UNREADABLE
            except Vanished:
                return None, {}, MISSING_FIELD
        else:
            text = self.options.caption_template.format(label=source.label, stem=unicodedata.normalize("NFC", stem))
            caption, reason = text.encode(), None
        if caption is None:  # utf8_field gives no bytes exactly when it gives a reason
            return None, {}, reason
        if not files.exists(source.path):  # listed, then deleted or moved before this worker read it
            return None, {}, MISSING_IMAGE
        if not files.is_regular_file(source.path):
            return None, {}, NOT_A_FILE
        fields = {"caption": caption, **({LABEL: source.label.encode()} if source.label is not None else {})}
        try:
            return read_file(source.path), fields, None
        except Unreadable:
            return None, {}, UNREADABLE
        except Vanished:
            return None, {}, MISSING_IMAGE

    def _row(self, values: Mapping[str, Any], base: str) -> tuple[bytes | None, Fields, Reason]:
        options = self.options
        fields: Fields = {}
        for name, column in (("caption", options.caption_field), *((f, f) for f in options.extra_fields)):
            value, reason = utf8_field(values.get(column), text_only=name == "caption")
            if value is None:  # utf8_field gives no bytes exactly when it gives a reason
                return None, {}, reason
            fields[name] = value
        image = values.get(options.image_field)
        if isinstance(image, dict):  # an HF Image struct: its bytes when stored, else its path
            image = image.get("bytes") or image.get("path")
        if isinstance(image, str) and image:
            path, reason = _image_path(image, base)
            if reason is not None:
                return None, {}, reason
            try:
                image = read_file(path)
            except Unreadable:
                return None, {}, UNREADABLE
            except Vanished:
                return None, {}, MISSING_IMAGE
        if not isinstance(image, bytes):
            return None, {}, MISSING_FIELD
        return image, fields, None

    def _columns(self) -> list[str]:
        return [self.options.image_field, self.options.caption_field, *self.options.extra_fields]

    def _jsonl_rows(self, source: Source) -> Iterator[tuple[int, Mapping[str, Any], Reason]]:
        with files.open_read(source.path) as raw, decompressed(raw, compression_of(source.path)) as stream:
            for row, line in enumerate(bounded_lines(stream, MAX_ROW_BYTES)):
                if line is None:
                    yield row, {}, TOO_LONG
                    continue
                try:
                    values = json.loads((without_bom(line) if row == 0 else line).decode("utf-8"))
                except UnicodeDecodeError:
                    yield row, {}, INVALID_UTF8
                except ValueError:
                    yield row, {}, MALFORMED_JSON
                else:
                    yield (row, values, None) if isinstance(values, dict) else (row, {}, MALFORMED_JSON)

    def _parquet_rows(self, source: Source) -> Iterator[tuple[int, Mapping[str, Any], Reason]]:
        pa = require("pyarrow", for_what="reading parquet rows")
        pq = require("pyarrow.parquet", for_what="reading parquet rows")
        with files.open_read(source.path) as raw:
            try:
                table = pq.ParquetFile(raw)
            except (pa.ArrowException, OSError) as error:
                # The footer is written last: a file that starts as parquet but lacks it was cut short.
                raw.seek(0)
                reason = TRUNCATED_INPUT if raw.read(4) == b"PAR1" else CORRUPT_INPUT
                raise DamagedInput(reason, f"parquet: {error}") from error
            columns = [c for c in self._columns() if c in table.schema_arrow.names]
            row, rows = 0, table.metadata.num_rows
            try:
                for group in range(table.num_row_groups):
                    for batch in table.iter_batches(columns=columns, batch_size=64, row_groups=[group]):
                        for values in batch.to_pylist():
                            yield row, values, None
                            row += 1
            except (pa.ArrowException, OSError) as error:
                raise DamagedInput(CORRUPT_INPUT, f"parquet: {error}", lost=max(1, rows - row)) from error

    def _hf_rows(self, source: Source) -> Iterator[tuple[int, bytes | None, Fields, Reason]]:
        datasets = require("datasets", for_what="reading a saved Hugging Face dataset")
        try:
            dataset = datasets.load_from_disk(source.path)
        except (OSError, ValueError) as error:
            raise DamagedInput(CORRUPT_INPUT, f"load_from_disk: {error}") from error
        # Arrow straight from the dataset's files: an Image column stays its stored {bytes, path} struct.
        table = dataset.with_format("arrow")
        columns = [c for c in self._columns() if c in dataset.column_names]
        for start in range(0, len(dataset), _HF_ROWS):
            chunk = table[start : start + _HF_ROWS].select(columns)
            for offset, values in enumerate(chunk.to_pylist()):
                yield (start + offset, *self._row(values, source.path))


class ReadImages(beam.PTransform):
    """PCollection[tuple[Source, ...]] (read units: image_sources.reads) → ((file, row), (image bytes,
    {field: bytes}, draw)) and a tally per unit (`stats`).

    The draw is Source.draw(row): where the record goes, decided where its Source's name is known.
    `reader` is the DoFn that reads one Source; `main` names the main output.
    """

    reader: type[ReadSource] = ReadSource
    main = "images"

    def __init__(self, options: ImageReadOptions, label: str | None = None) -> None:
        super().__init__(label)
        self.options = options

    def expand(self, sources: beam.PCollection) -> beam.pvalue.DoOutputsTuple:
        return (
            sources
            | "SpreadSources" >> beam.Reshuffle()
            | "ReadSource" >> beam.ParDo(self.reader(self.options)).with_outputs(STATS_TAG, main=self.main)
        )

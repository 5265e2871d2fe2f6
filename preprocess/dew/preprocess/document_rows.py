"""The rows of one input file as ReadDocuments reads them, without Beam: (row, text, drop reason).

ReadDocuments' per-file step (read_documents._ReadFile) and `dew-preprocess inspect`, which shows the
text a clean job removed by reading its source back up to its row, both read a file through
DocumentRows, so inspect finds at a row the very document the job found there: the same line
splitting and max_document_bytes limit, byte order mark, text_field, txt mode and parquet row order.
Importing it imports no Beam (inspect must not).

A file is read to its verified end: a compressed stream must close its last frame (zstd) or member
(gzip, whose CRC and length are checked), a parquet file must carry its footer and decode every row
group. Damage raises DamagedInput once the rows before it were yielded; the caller counts the rest.

`decompressed` is the one opener of compressed row files: the images job's jsonl rows and ingest-urls'
url lists (dew.preprocess.image_reading, url_reading) read theirs through it too, so a .gz or .zst file
cut or corrupted anywhere is the same damaged input, for the same reason, in every job.
"""

from __future__ import annotations

import codecs
import contextlib
import dataclasses
import gzip
import io
import json
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

from dew.data.extras import require

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
# A list's row (an image row, a url, a video) longer than this is dropped (too_long), never held whole.
MAX_ROW_BYTES = 1 << 24
# A compressed file's suffix → its compression (the name's end, in any case); other files are read as stored.
COMPRESSIONS = {".gz": "gzip", ".zst": "zstd", ".zstd": "zstd"}
# Compressed bytes handed to the zstd decoder at once: one call inflates at most this times the ratio.
_ZSTD_FEED = 1 << 13
# Bytes read at once from a file whose contents are only being checked or decoded, not held.
_READ_CHUNK = 1 << 20

Row = tuple[int, str | None, str | None]  # (row, text, None) for a document, (row, None, reason) for a drop


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

    @classmethod
    def recorded(cls, config: Mapping[str, Any]) -> ReadOptions:
        """The options a job ran with, from the config its meta.json records (CleanPlan.config: every
        field but strict, which changes no byte of output); a field it lacks keeps its default."""
        names = [f.name for f in dataclasses.fields(cls) if f.name != "strict"]
        return cls(**{name: config[name] for name in names if name in config})


def compression_of(path: str) -> str:
    """none, gzip or zstd, from the end of the file name (COMPRESSIONS)."""
    name = path.lower()
    return next((kind for suffix, kind in COMPRESSIONS.items() if name.endswith(suffix)), "none")


def without_compression(path: str) -> str:
    """The file name without its compression suffix (.gz, .zst, .zstd), lower-cased: what it decompresses to."""
    name = path.lower()
    suffix = next((suffix for suffix in COMPRESSIONS if name.endswith(suffix)), "")
    return name[: len(name) - len(suffix)]


def kind_of(path: str) -> tuple[str, str]:
    """(format, compression) from the file name: jsonl/txt/parquet and none/gzip/zstd."""
    name, compression = without_compression(path), compression_of(path)
    for suffix, kind in ((".jsonl", "jsonl"), (".ndjson", "jsonl"), (".json", "jsonl"), (".txt", "txt")):
        if name.endswith(suffix):
            return kind, compression
    if name.endswith(".parquet") and compression == "none":
        return "parquet", compression
    raise ValueError(f"{path}: cannot tell the format from the name; expected .jsonl, .txt or .parquet (+ .gz/.zst)")


def without_bom(data: bytes) -> bytes:
    """`data` without a leading UTF-8 byte order mark. Windows tools (Notepad, Excel's "CSV UTF-8") start
    a text export with one; it is no part of the first line, which would otherwise be no JSON, a text
    starting with U+FEFF, or a csv header whose first column is named "\ufeffurl". Readers call it on the
    first line (or whole text) of a file, as Python's utf-8-sig codec does."""
    return data[len(codecs.BOM_UTF8) :] if data.startswith(codecs.BOM_UTF8) else data


def bounded_lines(stream: Any, limit: int) -> Iterator[bytes | None]:
    """The lines of a bytes stream, each of at most `limit` bytes besides its line break; None stands
    for a longer one, read past in bounded reads and never held whole."""
    size = limit + 2  # room for "\r\n"
    while line := stream.readline(size):
        if len(line) == size and not line.endswith(b"\n"):
            del line  # the rest is read past in small pieces: at most `size` bytes are held at once
            while (rest := stream.readline(_READ_CHUNK)) and not rest.endswith(b"\n"):
                pass
            yield None
        else:
            yield line


class DocumentRows:
    """The rows of the file at `path` (its kind told by its name), read from its raw bytes by `read`."""

    def __init__(self, path: str, options: ReadOptions) -> None:
        self.options = options
        self.kind, self.compression = kind_of(path)

    def read(self, raw: Any) -> Iterator[Row]:
        """Every row of `raw` (the file's bytes, open; seekable for parquet) in order, raising
        DamagedInput where the file ends early or goes wrong."""
        if self.kind == "parquet":
            yield from self._parquet_rows(raw)
            return
        with decompressed(raw, self.compression) as stream:
            yield from self._stream_rows(stream)

    def at(self, raw: Any, row: int) -> Row | None:
        """Row `row` of `raw`, reading no further; None when the file ends before it."""
        for found in self.read(raw):
            if found[0] == row:
                return found
        return None

    def _stream_rows(self, stream: Any) -> Iterator[Row]:
        if self.kind == "txt" and self.options.txt_documents == "file":
            data = without_bom(stream.read(self.options.max_document_bytes + 1))
            while stream.read(_READ_CHUNK):
                pass  # a document too long to hold is still read to the end, to verify the stream
            yield (0, *self._text(data))
            return
        for row, line in enumerate(bounded_lines(stream, self.options.max_document_bytes)):
            if row == 0 and line is not None:
                line = without_bom(line)
            if line is None:
                yield row, None, TOO_LONG
            elif self.kind == "txt":
                yield (row, *self._text(_without_break(line)))
            else:
                yield (row, *self._json(line))

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

    def _parquet_rows(self, raw: Any) -> Iterator[Row]:
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


class _NotEmpty:
    """A compressed file's bytes, whose first read raises EOFError when there are none. No gzip member or
    zstd frame is 0 bytes long (gzip -t and zstd -t refuse such a file): it is a copy cut before its
    first byte, its rows lost, where gzip and zstandard read it as a whole file of no data."""

    def __init__(self, raw: Any) -> None:
        self.raw, self.started = raw, False

    def read(self, size: int = -1) -> bytes:
        data: bytes = self.raw.read(size)
        if not (data or self.started) and size:
            raise EOFError("the file is empty (0 bytes)")
        self.started = True
        return data

    def seek(self, offset: int, whence: int = io.SEEK_SET) -> int:  # gzip's rewind, never a reader's
        return int(self.raw.seek(offset, whence))


@contextlib.contextmanager
def decompressed(raw: Any, compression: str, *, label: str | None = None) -> Iterator[Any]:
    """`raw` (a file's bytes, open) as the bytes it decompresses to, for a block that reads them to the
    end; `raw` itself when `compression` (compression_of) is none.

    A stream that stops inside its last gzip member or zstd frame, or whose bytes go wrong, raises
    DamagedInput out of the block, once the rows before the damage were read: truncated_input for a cut
    (gzip's and _ZstdFrames' EOFError; a file of 0 bytes too, see _NotEmpty), corrupt_input for bytes
    that are not gzip, bad deflate data, a CRC or length mismatch, or zstd bytes that do not decode.
    `label` starts the error's detail, which a job's stats.json shows (default: the compression).

    Every whole row decoded before a cut is read: a read of the stream returns what was decoded before
    it raises. (An io.BufferedReader over GzipFile did not: its readinto of a buffer gathers several
    reads, and one that raises loses those before it, up to 8 KiB of rows before a cut, uncounted.)
    Read it by lines (readline) or through io.TextIOWrapper; codecs' stream readers ask for fixed
    counts and lose the rows of a short read the same way.
    """
    stream: Any = raw
    if compression == "gzip":
        stream = gzip.GzipFile(fileobj=_NotEmpty(raw))  # buffered itself
    elif compression == "zstd":
        stream = io.BufferedReader(_ZstdFrames(_NotEmpty(raw)))
    try:
        yield stream
    except EOFError as error:  # a stream cut before its end marker
        raise DamagedInput(TRUNCATED_INPUT, f"{label or compression}: {error}") from error
    except (gzip.BadGzipFile, zlib.error) as error:  # not gzip, bad deflate data, CRC or length mismatch
        raise DamagedInput(CORRUPT_INPUT, f"{label or 'gzip'}: {error}") from error


def _without_break(line: bytes) -> bytes:
    """A line without its break, "\n" or "\r\n": a "\r" before that is the document's own."""
    if line.endswith(b"\n"):
        line = line[:-1]
    return line[:-1] if line.endswith(b"\r") else line

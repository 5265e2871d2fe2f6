"""The rows of a csv list (ingest-urls' url lists, decode-clips' video lists), read in bounded lines.

Its bytes come from document_rows.decompressed, so a .csv.gz or .csv.zst list cut short or corrupted is
the same damaged input as any row file; importing it imports no Beam.
"""

from __future__ import annotations

import csv
import io
from collections.abc import Iterator
from typing import Any

from dew.preprocess.document_rows import CORRUPT_INPUT, MAX_ROW_BYTES, DamagedInput

# A row with more fields than the header names: an unquoted comma in a caption, say. Its fields cannot be
# told apart (which comma split the caption?), so it is dropped, never read as its first fields.
MALFORMED_CSV = "malformed_csv"


def csv_records(stream: Any, *, limit: int = MAX_ROW_BYTES) -> Iterator[tuple[dict[str, str], str | None]]:
    """The rows of a csv list (a bytes stream) as (dict keyed by its header, None), or ({}, MALFORMED_CSV)
    for a row with more fields than the header (a row with fewer lacks the rest: the caller's field
    check finds them missing).

    Undecodable bytes become lone surrogates, which the caller's field check refuses, so a bad cell drops
    its row only; a byte order mark (Excel's "CSV UTF-8") is not part of the first column's name. The
    text is decoded as each read of the stream gives it (io.TextIOWrapper's read1), so a list cut short
    keeps every whole row before the cut. A field may be as long as a line (csv's own limit, 128 Ki
    characters, is raised to `limit` for the process). A line longer than `limit` characters, text csv
    cannot parse, or a file that ends inside a quoted field (a quote never closed, or a plain file cut
    inside one: csv would give one last row holding the rest of the file, the rows after the quote lost
    in it) raises DamagedInput (corrupt_input) once the rows before it were given: csv cannot tell where
    the row after it starts, as a quoted field may hold line breaks."""
    csv.field_size_limit(max(csv.field_size_limit(), limit))
    lines = _Lines(io.TextIOWrapper(stream, encoding="utf-8-sig", errors="surrogateescape", newline=""), limit)
    records = csv.DictReader(lines)
    try:
        if records.fieldnames is not None:  # the header read
            lines.check_closed(1)
        start = lines.number + 1
        for record in records:
            lines.check_closed(start)
            yield ({}, MALFORMED_CSV) if None in record else (record, None)
            start = lines.number + 1
    except csv.Error as error:
        raise DamagedInput(CORRUPT_INPUT, f"csv: {error}") from error


class _Lines:
    """The lines of a text stream for csv, each of at most `limit` characters, counted; `ended` once the
    stream gave its last."""

    def __init__(self, text: Any, limit: int) -> None:
        self.text, self.limit, self.number, self.ended = text, limit, 0, False

    def __iter__(self) -> _Lines:
        return self

    def __next__(self) -> str:
        line = self.text.readline(self.limit + 2)
        if not line:
            self.ended = True
            raise StopIteration
        self.number += 1
        if len(line) == self.limit + 2 and not line.endswith(("\n", "\r")):
            raise DamagedInput(CORRUPT_INPUT, f"csv: line {self.number} is longer than {self.limit:,} characters")
        return line

    def check_closed(self, start: int) -> None:
        """Raises DamagedInput when the row from line `start`, just read, was ended by the end of the stream:
        csv reads past a row's last line only while a quoted field is open."""
        if self.ended:
            raise DamagedInput(
                CORRUPT_INPUT,
                f"csv: the file ends inside a quoted field opened in the row from line {start}: "
                "a quote never closed (or the file was cut inside it) makes that row the rest of the file",
            )

"""Committed documents corpora: found on the launcher, read back on the workers.

`documents_corpus(path)` is what both `clean --against DIR` and `tokenize --input DIR` ask: the
committed meta.json of a documents directory (an uncommitted one is refused by dew.data.formats, naming
what commits it), its shards checked by size, and their paths in order.
"""

from __future__ import annotations

from collections.abc import Iterator

import apache_beam as beam

from dew.data import committed, formats, locations
from dew.data.extras import require
from dew.data.sections import DocumentsSection
from dew.preprocess import files
from dew.preprocess.cleaning.plan import Against

_BATCH = 1024


def is_documents_directory(path: str) -> bool:
    """Whether an --input names a folder a dew job wrote (committed or not), to be read as a documents
    corpus; any other folder is left to the file listing, which says how to name its files."""
    if any(c in path for c in "*?[") or not locations.is_directory(path):
        return False
    names = committed.listing(path)
    return committed.META in names or bool(committed.dew_signs(names))


def documents_corpus(path: str) -> Against:
    """A committed documents directory: its fingerprint and every shard of every split, in order."""
    path = path.rstrip("/")
    meta = formats.read_meta(path, kind=DocumentsSection.KIND)
    formats.check_local_sizes(path, meta)
    shards = tuple(files.join(path, shard.name) for split in sorted(meta.splits) for shard in meta.splits[split])
    return Against(path=path, fingerprint=meta.fingerprint(), shards=shards)


def read_columns(path: str, columns: list[str]) -> Iterator[list[bytes]]:
    """The given binary columns of a documents shard, row by row, a row group at a time."""
    pq = require("pyarrow.parquet", for_what="reading documents shards")
    with files.open_read(path) as raw:
        table = pq.ParquetFile(raw)
        for batch in table.iter_batches(columns=columns, batch_size=_BATCH):
            yield from zip(*(batch.column(i).to_pylist() for i in range(len(columns))), strict=True)


class ReadAgainst(beam.DoFn):
    """(corpus rank, shard path) → (rank, document id, text) for every document of the shard."""

    def process(self, element: tuple[int, str]) -> Iterator[tuple[int, str, str]]:
        rank, path = element
        for doc_id, text in read_columns(path, ["id", "text"]):
            yield rank, doc_id.decode(), text.decode("utf-8")


def text_inputs(patterns: list[str], text_field: str) -> tuple[files.InputFile, ...]:
    """The input files of a job reading text (tokenize, clean): each pattern's files, where a pattern
    naming a folder must be a committed documents directory and stands for its shards.

    A documents shard keeps its text in the column `text`, which must then be the --text_field.
    """
    expanded: list[str] = []
    for pattern in patterns:
        if is_documents_directory(pattern):
            if text_field != "text":
                raise ValueError(
                    f"--input {pattern} is a documents directory, whose text is the field 'text', but "
                    f"--text_field is {text_field!r}: read it in a job of its own"
                )
            expanded.extend(documents_corpus(pattern).shards)
        else:
            expanded.append(pattern)
    return files.expand_inputs(expanded)

"""The one grouping a document's text travels through: by shard, beside the removals drawn to that shard.

A document's text leaves describe with its id, file index and row, keyed by the shard its id draws and by
nothing else, as one bytes value (record_entry: 20 fixed bytes, then the UTF-8 text), so a worker decodes
a shard's entries into one object each, not a tuple of five; the writer packs its record (id, text,
source, row) there, so the source path does not travel once a document. The dedup steps shuffle ids and
hashes only, each document's decision (kept, or removed for a reason) is a join of small tuples on its
node, and the shard count follows from the sizes of the kept records. A shard's grouping then holds the
records drawn to it (every document the quality filters passed, kept or a duplicate) and the removal rows
drawn to it: the writer reads the removal rows first (a shard's worth), writes the removal table, then
writes the shard from the records no row removed.
"""

from __future__ import annotations

import struct
from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from dew.data.formats import shard_name
from dew.data.sections import document_shard
from dew.preprocess import commit, files
from dew.preprocess.cleaning.plan import record
from dew.preprocess.cleaning.removals import Removal, removals_name, table_bytes
from dew.preprocess.commit import JobIdentity
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import _WriteShard

TRAIN = "train"
TABLES = "tables"
# A record entry's head: the id's 8 bytes, the file index and the row; the text's UTF-8 bytes follow.
_HEAD = struct.Struct(">8sIQ")


def record_entry(doc_id: str, file: int, row: int, text: str) -> bytes:
    """A document to write, as one bytes value: its id, file index and row (fixed width), then its text."""
    return _HEAD.pack(bytes.fromhex(doc_id), file, row) + text.encode("utf-8")


def route_record(entry: bytes, counts: Mapping[str, int]) -> tuple[Any, Any]:
    """A record entry → ((train, shard), entry): the shard its id draws."""
    return (TRAIN, document_shard(entry[:8].hex(), counts[TRAIN])), entry


def route_removal(row: Removal, counts: Mapping[str, int]) -> tuple[Any, Any]:
    """A Removal (a tuple, where a record entry is bytes) → ((train, shard), row): the shard the removed
    document would have gone to."""
    return (TRAIN, document_shard(row[0], counts[TRAIN])), row


class WriteCleanShard(_WriteShard):
    """((split, j), [record entries, removal rows, or None]) → (split, Shard), and (table name, rows) on
    TABLES: the removal table beside shard j, then shard j of the records not removed, each record packed
    here from its id, text, file index (into `paths`) and row."""

    def __init__(self, output: str, fmt: ShardFormat, claim: JobIdentity, paths: Sequence[str]) -> None:
        super().__init__(output, fmt, claim)
        self.paths = list(paths)

    def process(self, element: tuple[tuple[str, int], Iterable[Any]], counts: Mapping[str, int]) -> Iterator[Any]:
        (split, index), values = element
        rows = [value for value in values if isinstance(value, tuple)]
        name = removals_name(shard_name(split, index, counts[split], "parquet"))
        commit.check_claim(self.output, self.claim)  # a run that lost its claim writes nothing more there
        files.write_atomic(files.join(self.output, name), table_bytes(rows), self.output)
        yield beam.pvalue.TaggedOutput(TABLES, (name, len(rows)))
        removed = {row[0] for row in rows}
        del rows
        yield from super().process(((split, index), self._kept(values, removed)), counts)

    def _kept(self, values: Iterable[Any], removed: set[str]) -> Iterator[tuple[tuple[int, int], bytes]]:
        """((file, row), record) of each record entry whose id no removal row names."""
        size = _HEAD.size
        for entry in values:
            if isinstance(entry, bytes):
                raw, file, row = _HEAD.unpack_from(entry)
                doc_id = raw.hex()
                if doc_id not in removed:
                    yield (file, row), record(doc_id, entry[size:], self.paths[file], row)

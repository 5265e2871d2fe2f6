"""The one grouping a document's text travels through: by shard, beside the removals drawn to that shard.

A document's text leaves describe with its id, file index and row, keyed by the shard its id draws and
by nothing else; the writer packs its record (id, text, source, row) there, so the source path does not
travel once a document. The dedup steps shuffle ids and hashes only, each document's decision (kept, or removed
for a reason) is a join of small tuples on its node, and the shard count follows from the sizes of the
kept records. A shard's grouping then holds the records drawn to it (every document the quality filters
passed, kept or a duplicate) and the removal rows drawn to it: the writer reads the removal rows first
(a shard's worth), writes the removal table, then writes the shard from the records no row removed.
"""

from __future__ import annotations

from collections.abc import Iterable, Iterator, Mapping, Sequence
from typing import Any

import apache_beam as beam

from dew.data.formats import shard_name
from dew.preprocess import files
from dew.preprocess.cleaning.plan import draw, record
from dew.preprocess.cleaning.removals import Removal, removals_name, table_bytes
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import _WriteShard

TRAIN = "train"
TABLES = "tables"
_RECORD, _REMOVAL = 0, 1


def shard_of(doc_id: str, count: int) -> int:
    return min(count - 1, int(draw(doc_id) * count))


def route_record(element: tuple[str, int, int, str], counts: Mapping[str, int]) -> tuple[Any, Any]:
    """(id, file, row, text) → ((train, shard), record entry)."""
    return (TRAIN, shard_of(element[0], counts[TRAIN])), (_RECORD, *element)


def route_removal(row: Removal, counts: Mapping[str, int]) -> tuple[Any, Any]:
    """A Removal → ((train, shard), removal entry): the shard the removed document would have gone to."""
    return (TRAIN, shard_of(row[0], counts[TRAIN])), (_REMOVAL, row)


class WriteCleanShard(_WriteShard):
    """((split, j), [record and removal entries, or None]) → (split, Shard), and (table name, rows) on
    TABLES: the removal table beside shard j, then shard j of the records not removed, each record packed
    here from its id, text, file index (into `paths`) and row."""

    def __init__(self, output: str, fmt: ShardFormat, paths: Sequence[str]) -> None:
        super().__init__(output, fmt)
        self.paths = list(paths)

    def process(self, element: tuple[tuple[str, int], Iterable[Any]], counts: Mapping[str, int]) -> Iterator[Any]:
        (split, index), values = element
        rows = [value[1] for value in values if value is not None and value[0] == _REMOVAL]
        name = removals_name(shard_name(split, index, counts[split], "parquet"))
        files.write_atomic(files.join(self.output, name), table_bytes(rows), self.output)
        yield beam.pvalue.TaggedOutput(TABLES, (name, len(rows)))
        removed = {row[0] for row in rows}
        del rows
        kept = (
            ((file, row), record(doc_id, text, self.paths[file], row))
            for tag, doc_id, file, row, text in (v for v in values if v is not None and v[0] == _RECORD)
            if doc_id not in removed
        )
        yield from super().process(((split, index), kept), counts)

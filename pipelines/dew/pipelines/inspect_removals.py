"""A few removed documents a reason, for inspect to explain: read from the clean job's removal tables.

stats.json keeps one example a reason, the first in source order. The removal tables beside a documents
directory's shards (dew.preprocess.cleaning.removals: a row for each removed document whose id draws
that shard) name every removal, so inspect takes more examples from them: the tables are read in shard
order and their rows in id order, until each reason has the examples asked for or MAX_TABLES tables are
read. Ids are hashes, so the rows shown are spread over the corpus rather than bunched at its start.

A table is read as data only while it is the table the clean job wrote: its row count is the one
stats.json recorded for it, and every row is typed as clean writes it, its id is the hash of its source
and row (removals.document_id) and draws its shard, and a duplicate's corpus is this directory or one
it was cleaned against. Any other table (missing, cut, another shard's, rewritten, its rows moved to
other documents) is named in the problems returned, and its rows are not shown: an example shown is
the very document clean removed.
"""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

from dew.data import formats, remote
from dew.data.sections import document_shard
from dew.preprocess.cleaning.removals import document_id, read_table, removals_name

# The most removal tables one inspect reads: enough for examples of every common reason, bounded on a
# corpus of many shards (a rare reason past them keeps its stats.json example).
MAX_TABLES = 64
_TRAIN = "train"
_COLUMNS = {"id", "reason", "duplicate_of", "duplicate_in", "source", "row"}


def removal_examples(
    path: str, meta: formats.Meta, stats: Mapping[str, Any], per_reason: int
) -> tuple[dict[str, list[dict[str, Any]]], list[str]]:
    """({reason: up to `per_reason` removals}, problems) of the documents directory at `path`.

    `stats` is its stats.json: a reason's first example is its `drop_examples` one, then rows of the
    removal tables follow, each {"path", "row", "id"} plus "duplicate_of" and "duplicate_in" for a
    duplicate, as a drop example is. Only reasons of removals (examples with an id) are listed."""
    first = {r: e for r, e in stats.get("drop_examples", {}).items() if "id" in e}
    counts = stats.get("dropped", {})
    found = {reason: [dict(example)] for reason, example in first.items()}
    wanted = {reason: min(per_reason, counts.get(reason, 1)) for reason in first}
    recorded = stats.get("removal_tables")
    problems: list[str] = []
    if per_reason <= 1 or not found or not isinstance(recorded, Mapping):
        return {reason: listed[:per_reason] for reason, listed in found.items()}, problems
    shards = meta.shards(_TRAIN)
    corpora = {"", *(against["path"] for against in meta.config.get("against") or ())}
    for index, shard in enumerate(shards[:MAX_TABLES]):
        if all(len(listed) >= wanted[reason] for reason, listed in found.items()):
            break
        name = removals_name(shard.name)
        rows = _checked_rows(path, name, recorded.get(name), (index, len(shards), corpora), problems)
        for row in rows:
            listed = found.get(row["reason"])
            if listed is None or len(listed) >= wanted[row["reason"]] or listed[0]["id"] == row["id"]:
                continue
            example = {"path": row["source"], "row": row["row"], "id": row["id"]}
            if row["duplicate_of"] is not None:
                example.update(duplicate_of=row["duplicate_of"], duplicate_in=row["duplicate_in"])
            listed.append(example)
    return found, problems


def _checked_rows(
    path: str, name: str, recorded: int | None, place: tuple[int, int, set[str]], problems: list[str]
) -> list[dict[str, Any]]:
    """The rows of removal table `name`, or none with a problem added when it is not what the job wrote.
    `place` is (the table's shard index, the shard count, the corpora a duplicate may be kept in)."""
    table = _join(path, name)
    if recorded is None:
        problems.append(f"{table}: stats.json records no such removal table, so its rows are not shown")
        return []
    try:
        rows = read_table(table)
    except (OSError, ValueError) as error:  # missing or not parquet (pyarrow's errors are both)
        problems.append(f"{table} could not be read ({error}); its rows are not shown")
        return []
    if rows and not set(rows[0]) >= _COLUMNS:
        problems.append(f"{table} lacks the columns {sorted(_COLUMNS - set(rows[0]))}; its rows are not shown")
        return []
    index, shards, corpora = place
    if len(rows) != recorded:
        what = f"{len(rows)} rows where stats.json recorded {recorded}"
    elif not all(_typed(row, corpora) for row in rows):
        what = "rows clean does not write (a column of another type, or a duplicate kept in no known corpus)"
    elif not all(_draws(row["id"], shards, index) for row in rows):
        what = "rows of other shards"
    elif not all(row["id"] == document_id(row["source"], row["row"]) for row in rows):
        what = "rows whose id is not the one of their source and row (moved to other documents)"
    else:
        return rows
    problems.append(f"{table} holds {what}: it changed after the clean, so its rows are not shown")
    return []


def _typed(row: Mapping[str, Any], corpora: set[str]) -> bool:
    """Whether a row's values are of the types clean writes, a duplicate's corpus one of `corpora`."""
    if not all(isinstance(row[key], str) for key in ("id", "reason", "source")) or type(row["row"]) is not int:
        return False
    if row["duplicate_of"] is None:
        return row["duplicate_in"] is None
    return (
        isinstance(row["duplicate_of"], str) and isinstance(row["duplicate_in"], str) and row["duplicate_in"] in corpora
    )


def _join(path: str, name: str) -> str:
    return f"{path.rstrip('/')}/{name}" if remote.is_remote(path) else os.path.join(path, name)


def _draws(doc_id: Any, shards: int, index: int) -> bool:
    try:
        return document_shard(str(doc_id), shards) == index
    except ValueError:  # not a hex id: not a row the job wrote
        return False

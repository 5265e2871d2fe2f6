"""The status table of an ingest-urls shard: every row routed to the shard, written or dropped and why.

`<split>-SSSSS-of-NNNNN.status.parquet` sits beside its shard, one row per input row in key order:
file, row (the key), url, status (`written` or `dropped`), reason (a drop reason, else empty) and bytes
(the written record's length, which the piece index needs, so a committed shard is never read back to
resume). Its schema metadata names the sha256 of the shard it describes: a table and a shard belong
together only when that matches, which is how a crash between committing the two is seen.

A `--refetch_failed` run rewrites a shard and its table in place. It commits the table first and keeps
the table it replaces in the run's temporary directory until the corpus is committed again, so a crash
between the two commits leaves the old shard with the old table still to be found (`current`).
"""

from __future__ import annotations

import collections
import dataclasses
import os
import tempfile
from typing import Any

from dew.data.extras import require
from dew.data.images import fetch
from dew.preprocess import files
from dew.preprocess.constants import STATUS_SUFFIX

WRITTEN, DROPPED = "written", "dropped"
# Drops a later run may fetch again: the server failed or took too long. Every other reason is the
# answer itself (a 404 is http_error too, and cheap to ask again).
REFETCHED = (fetch.TIMEOUT, fetch.HTTP_ERROR)
_SHA = b"dew.shard_sha256"
Key = tuple[int, int]


@dataclasses.dataclass(frozen=True)
class Status:
    """One shard's rows in key order, with the sha256 of the shard they were written with."""

    keys: tuple[Key, ...]
    urls: tuple[str, ...]
    reasons: tuple[str, ...]  # "" where the row was written
    lengths: tuple[int, ...]  # the record's length where written, else 0
    shard_sha256: str

    def drops(self) -> collections.Counter[str]:
        return collections.Counter(reason for reason in self.reasons if reason)

    def written(self) -> list[Key]:
        return [key for key, reason in zip(self.keys, self.reasons, strict=True) if not reason]

    def to_refetch(self) -> set[Key]:
        return {key for key, reason in zip(self.keys, self.reasons, strict=True) if reason in REFETCHED}


def status_name(shard_name: str) -> str:
    return os.path.splitext(shard_name)[0] + STATUS_SUFFIX


def _stash_path(output: str, shard_name: str) -> str:
    return files.join(output, files.TEMP_DIR, "refetched", status_name(shard_name))


def write_status(output: str, shard_name: str, status: Status, *, keep_previous: bool) -> None:
    """Commits the shard's table (before the shard itself); `keep_previous` stashes the one it replaces."""
    pa = _pyarrow()
    final = files.join(output, status_name(shard_name))
    if keep_previous and files.exists(final):
        # The table being replaced matches the shard still committed (current() saw to that).
        files.write_atomic(_stash_path(output, shard_name), files.read_bytes(final), output)
    table = pa.table(
        {
            "file": pa.array([k[0] for k in status.keys], pa.int32()),
            "row": pa.array([k[1] for k in status.keys], pa.int64()),
            "url": pa.array(status.urls, pa.string()),
            "status": pa.array([DROPPED if r else WRITTEN for r in status.reasons], pa.string()),
            "reason": pa.array(status.reasons, pa.string()),
            "bytes": pa.array(status.lengths, pa.int64()),
        }
    ).replace_schema_metadata({_SHA: status.shard_sha256.encode()})
    with tempfile.TemporaryDirectory(prefix="dew-status-") as local:
        path = os.path.join(local, os.path.basename(final))
        _parquet().write_table(table, path)
        files.upload(path, final, output, replace=True)


def read_status(path: str) -> Status:
    with files.open_read(path) as f:
        table = _parquet().read_table(f)
    columns = table.to_pydict()
    return Status(
        keys=tuple(zip(columns["file"], columns["row"], strict=True)),
        urls=tuple(columns["url"]),
        reasons=tuple(columns["reason"]),
        lengths=tuple(columns["bytes"]),
        shard_sha256=(table.schema.metadata or {}).get(_SHA, b"").decode(),
    )


def current(output: str, shard_name: str, shard_sha256: str) -> Status | None:
    """The table of the committed shard whose sha256 is given, or None when none matches it.

    A table stashed by an interrupted refetch is put back when it is the one matching.
    """
    final = files.join(output, status_name(shard_name))
    if files.exists(final) and (status := read_status(final)).shard_sha256 == shard_sha256:
        return status
    stash = _stash_path(output, shard_name)
    if files.exists(stash) and (status := read_status(stash)).shard_sha256 == shard_sha256:
        files.write_atomic(final, files.read_bytes(stash), output)
        return status
    return None


def _pyarrow() -> Any:
    return require("pyarrow", for_what="ingest-urls status tables")


def _parquet() -> Any:
    return require("pyarrow.parquet", for_what="ingest-urls status tables")

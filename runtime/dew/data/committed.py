"""Telling a directory dew wrote from a raw shard set, and a shard's own record count from meta.json's.

A directory a dew job writes is readable only once its meta.json is there. Before that (a job still
running, or one that was killed) it holds the job's claim (`.dew-job.json`), its temporaries
(`.dew-tmp`) and the shards finished so far under their final names; a committed directory that lost
its meta.json still holds shards named `<split>-SSSSS-of-NNNNN.<ext>` and the job's stats.json. Read
as a raw shard set, either would give a part of the corpus, unchecked, its val records among its
training ones. So every reader asks `refuse_dew_directory` before it reads a directory without a
meta.json as raw shards, and every missing meta.json is reported through `not_committed`, which says
what the directory is, that meta.json is missing and what commits it.
"""

from __future__ import annotations

import json
import os
import re
from collections.abc import Iterable
from typing import Any

from dew.data import remote
from dew.data.extras import require
from dew.data.shard_entry import Shard
from dew.data.shard_names import BLOCKS_SUFFIX, shard_extension

META = "meta.json"
JOB_MARKER = ".dew-job.json"
TEMP_DIR = ".dew-tmp"
STATS = "stats.json"
_DEW_SHARD = re.compile(r"^[A-Za-z0-9_.]+-\d{5}-of-\d{5}\.(bin|array_record|parquet)$")


class UncommittedError(FileNotFoundError):
    """A directory a dew job wrote, or began to write, holds no meta.json: it is not a corpus yet."""


def listing(directory: str) -> list[str]:
    """The names directly under a local or gs:// directory; [] when there is none."""
    if remote.is_remote(directory):
        try:
            return remote.list_names(directory)
        except FileNotFoundError:
            return []
    local = remote.resolve(directory)
    return sorted(os.listdir(local)) if os.path.isdir(local) else []


def dew_signs(names: Iterable[str]) -> list[str]:
    """The names among `names` that only a dew job writes: its claim, its temporaries, its shard names."""
    names = sorted(names)
    signs = [n for n in (JOB_MARKER, TEMP_DIR) if n in names]
    return signs + [n for n in names if _DEW_SHARD.match(n)][:2]


def _job_of(directory: str, names: list[str]) -> str | None:
    """The job that claimed the directory, from its claim's config; None when it cannot be read."""
    if JOB_MARKER not in names:
        return None
    path = os.path.join(remote.resolve(directory), JOB_MARKER)
    try:
        if remote.is_remote(path):
            raw = remote.read_bytes(path)
        else:
            with open(path, "rb") as f:
                raw = f.read()
        job = json.loads(raw).get("config", {}).get("job")
    except (OSError, ValueError, AttributeError):
        return None
    return job if isinstance(job, str) else None


def not_committed(
    directory: str, writer: str = "the preprocess job", names: list[str] | None = None
) -> UncommittedError:
    """The error for a directory holding no meta.json, saying what the directory is and how to commit it."""
    names = listing(directory) if names is None else names
    signs = dew_signs(names)
    job = _job_of(directory, names)
    writer = f"dew-preprocess {job}" if job else writer  # the job that claimed it knows best what commits it
    rerun = f"Rerun `{writer} ... --output {directory}` to commit it"
    if JOB_MARKER in signs or TEMP_DIR in signs:
        what = f"a dew {job + ' ' if job else ''}job's directory that was never committed"
        return UncommittedError(
            f"{directory} is {what} ({' and '.join(s for s in signs if s in (JOB_MARKER, TEMP_DIR))} present, "
            f"{META} missing): the job is still running, or was killed before its commit, so its shards are a "
            f"part of the corpus at most. {rerun}: a rerun of the same job skips the shards already committed."
        )
    if signs:
        return UncommittedError(
            f"{directory} holds dew shards ({', '.join(signs)}) but no {META}: it was deleted or never copied "
            f"with them, so nothing says which records are whole or which split they belong to. Copy {META} "
            f"with the shards, or {rerun[0].lower() + rerun[1:]} again (with --overwrite)."
        )
    return UncommittedError(
        f"{directory} has no {META}: the corpus was never committed (a preprocess job still running, or one "
        f"that crashed, or never run there). {rerun}; a rerun skips shards already committed."
    )


def refuse_dew_directory(directory: str, names: list[str] | None = None, *, writer: str = "the preprocess job") -> None:
    """Raises before a directory is read as a raw shard set when dew wrote it: committed (it holds
    meta.json) or not (its claim, temporaries or shard names). A raw layout is read only where no dew
    job left its mark."""
    names = listing(directory) if names is None else names
    if META in names:
        raise ValueError(
            f"{directory} is a committed dew directory (it holds {META}), not a raw shard set; read it by its "
            "path alone, which keeps its val split apart and checks its shards against meta.json"
        )
    if dew_signs(names):
        raise not_committed(directory, writer, names=names)


def refuse_uncommitted(directory: str, names: list[str] | None = None, *, writer: str = "the preprocess job") -> None:
    """Raises before a file of `directory` is read on its own (a glob, a path) when the directory is one a
    dew job wrote and never committed, or one whose meta.json is gone: no meta.json, and the job's claim,
    its temporaries, or a shard beside its block checksums (`<shard>.blocks`), which only dew writes.

    A shard name alone is no mark here, unlike for a raw shard set (refuse_dew_directory): other tools
    name files `train-00000-of-00002.parquet` too, and a file named on its own is read as it is."""
    names = listing(directory) if names is None else names
    if META in names:
        return
    present = set(names)
    sidecars = any(_DEW_SHARD.match(n) and n + BLOCKS_SUFFIX in present for n in names)
    if JOB_MARKER in present or TEMP_DIR in present or sidecars:
        raise not_committed(directory, writer, names=names)


def check_records(where: str, found: int, recorded: int) -> None:
    """Refuses a shard whose own footer or index counts other records than meta.json says it holds."""
    if found != recorded:
        raise remote.DamagedError(
            f"{where} holds {found} records by its own footer, but {META} records {recorded}: the shard or "
            f"{META} was changed after the commit, and reading by {META}'s count would "
            f"{'drop' if found > recorded else 'run past'} records; {remote.OVERWRITE}"
        )


def open_array_record(path: str, *, where: str | None = None, record_count: int | None = None) -> Any:
    """An ArrayRecordReader over a local file for random access, its errors naming the file, and its
    footer's record count checked against `record_count` (meta.json's) when given."""
    from array_record.python.array_record_module import ArrayRecordReader

    if not os.path.exists(path):
        raise FileNotFoundError(f"no ArrayRecord file at {where or path}")
    try:
        reader = ArrayRecordReader(path, "readahead_buffer_size:0")
        if not reader.ok():  # a footer it cannot read is not raised, only kept in its status
            reader.read([0])  # which raises that status
            raise RuntimeError("its footer cannot be read")
    except Exception as error:  # the C++ reader raises bare RuntimeErrors without the path
        raise remote.DamagedError(f"{where or path} is not a readable ArrayRecord file: {error}") from None
    if record_count is not None:
        try:
            check_records(where or path, reader.num_records(), record_count)
        except remote.DamagedError:
            reader.close()
            raise
    return reader


def check_own_records(path: str, shard: Shard, *, where: str | None = None) -> None:
    """Refuses a local copy `path` of a committed shard whose own count (the ArrayRecord footer, the parquet
    footer) is not meta.json's `records`, naming the shard (`where`, by default `path`). A job reading a
    committed directory asks it when it first opens a shard, as the runtime's readers check theirs: a
    count that disagrees means the shard or meta.json changed after the commit. A `.bin` shard has no
    footer; its eos ids are its index (dew.data.tokens.bin_documents)."""
    where = where or path
    ext = shard_extension(shard.name)
    if ext == "array_record":
        open_array_record(path, where=where, record_count=shard.records).close()
    elif ext == "parquet":
        pq = require("pyarrow.parquet", for_what=f"reading parquet shard {where}")
        try:
            rows = pq.ParquetFile(path).metadata.num_rows
        except Exception as error:  # pyarrow names neither the file nor the fix
            raise remote.DamagedError(f"{where} is not a readable parquet file: {error}; {remote.OVERWRITE}") from None
        check_records(where, rows, shard.records)

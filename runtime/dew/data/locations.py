"""Where a reader's data lies: a committed directory or one data file read on its own, local or gs://."""

from __future__ import annotations

import dataclasses
import json
import os
from collections.abc import Mapping
from typing import Any

from dew.data import committed, formats, remote, shard_cache
from dew.data.sections import TokensSection


def is_directory(path: str) -> bool:
    """Whether `path` names a corpus directory rather than one data file (gs:// has no real directories)."""
    if remote.is_remote(path):
        return not path.rstrip("/").endswith(tuple(f".{ext}" for ext in formats.SHARD_EXTENSIONS))
    return os.path.isdir(remote.resolve(path))


def exists(path: str) -> bool:
    if remote.is_remote(path):
        return remote.exists(path) or (is_directory(path) and remote.exists(os.path.join(path, formats.META)))
    return os.path.exists(remote.resolve(path))


def local_file(path: str, holder: object | None = None) -> str:
    """A local path holding the data file `path`: itself (its `~` expanded), or a gs:// file's copy in
    the local cache, kept there while `holder` lives (dew.data.shard_cache.pin)."""
    return shard_cache.fetch(path, holder=holder) if remote.is_remote(path) else remote.resolve(path)


def sibling_json(path: str) -> tuple[str, Any]:
    """(where, content) of the meta.json beside a data file, local or gs://; content is None when there is none."""
    where = os.path.join(os.path.dirname(remote.resolve(path)) or ".", formats.META)
    if remote.is_remote(where):
        try:
            return where, json.loads(remote.read_bytes(where))
        except FileNotFoundError:
            return where, None
    if not os.path.exists(where):
        return where, None
    with open(where) as f:
        return where, json.load(f)


def is_dew_meta(data: Any) -> bool:
    return isinstance(data, Mapping) and str(data.get("format", "")).startswith("dew.")


@dataclasses.dataclass(frozen=True)
class SingleFile:
    """A data file read on its own: where to read it, the meta.json beside it as token fields (dtype, eos_id, ...;
    None for a nanoGPT-style .bin with none), and that meta.json's entry for it (None when unlisted)."""

    local: str
    tokens: dict[str, Any] | None
    shard: formats.Shard | None
    # Keeps a gs:// file's cached copy on disk: whoever reads `local` keeps this while it does.
    hold: shard_cache.Hold | None = None


def single_file(path: str) -> SingleFile:
    """Opens a data file read out of its directory, reading the meta.json beside it once.

    A dew meta.json gives its tokens section, and the file, when it lists it, is checked as the directory's
    reader checks it: by size now, a gs:// one fetched and checked by sha256 too. Any other JSON is taken as
    the token fields as it is, and an unlisted file is read as it is, unless it is named as a shard: a commit
    deletes every shard its meta.json does not list, so such a file was put there by hand and is refused.
    Without a meta.json, a file of a directory a dew job left uncommitted is refused
    (dew.data.committed.refuse_uncommitted)."""
    where, data = sibling_json(path)
    hold = shard_cache.Hold()
    if data is None:
        committed.refuse_uncommitted(os.path.dirname(remote.resolve(path)) or ".", writer=TokensSection.WRITER)
    if not is_dew_meta(data):
        return SingleFile(local_file(path, hold), data, None, hold)
    meta = formats.Meta.from_json(data, where=where)
    tokens = meta.expect(TokensSection.KIND, where).to_json()
    name = os.path.basename(path)
    shard = next((s for split in meta.splits.values() for s in split if s.name == name), None)
    if shard is None and formats.parse_shard_name(name) is not None:
        raise ValueError(
            f"{path} is named as a shard, but {where} lists no such shard: a commit leaves none it does not "
            "list, so the file is no part of the corpus committed there; read the directory itself, or move "
            "the file out of it to read it on its own"
        )
    if shard is None:
        local = local_file(path, hold)
    else:
        local = formats.verify_shard(os.path.dirname(path) or ".", shard, holder=hold)
    return SingleFile(local, tokens, shard, hold)

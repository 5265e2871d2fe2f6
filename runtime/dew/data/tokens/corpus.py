"""Opening a token corpus by path: a committed directory, or a single .bin/.array_record/.parquet file."""

from __future__ import annotations

import os
from collections.abc import Mapping

import numpy as np

from dew.data import formats, ranges, remote
from dew.data.pieces import offline_pieces
from dew.data.record_shards import is_indexed
from dew.data.tokens.sources import TokenBytes, TokenColumn, TokenRecords, TokenSource


def corpus_meta(path: str) -> formats.Meta | None:
    """meta.json of a token corpus directory; None for a single file (a directory must be committed,
    and hold tokens)."""
    return formats.read_meta(path, kind="tokens") if formats.is_directory(path) else None


def open_tokens(path: str, *, split: str = "train", field: str | None = None) -> TokenSource:
    """The token stream of `split` of a committed corpus directory, or of a single file, by its kind."""
    meta = corpus_meta(path)
    if meta is not None:
        shards = meta.shards(split)
        if not shards:
            raise ValueError(f"{path}: split {split!r} holds no shards")
        kinds = {formats.parse_shard_name(s.name)[3] for s in shards}
        if len(kinds) != 1:
            raise ValueError(f"{path}: split {split!r} mixes shard kinds {sorted(kinds)}")
        kind = kinds.pop()
        if kind == "bin":
            return TokenBytes(path, split=split)
        tokens = meta.tokens
        ranged = None
        # Records read without a field are raw ids, which the index names "".
        pieces = offline_pieces(path, meta, split, (field or "") if kind == "array_record" else field)
        by_record = kind == "array_record" and pieces is not None and all(is_indexed(s) for s in shards)
        if kind == "parquet" and remote.is_remote(path) and all(ranges.is_ranged(s) for s in shards):
            # Footers and row groups read by range, every block checked (dew.data.ranges).
            files = [os.path.join(path, s.name) for s in shards]
            ranged = [ranges.RangedShard(f, s) for f, s in zip(files, shards, strict=True)]
        elif by_record and remote.is_remote(path):
            # Each read fetches its records' chunks, every block checked (dew.data.record_shards).
            files = [os.path.join(path, s.name) for s in shards]
        else:
            files = [formats.verify_shard(path, s) for s in shards]
        # A gs:// shard was checked as it was fetched; a local one is checked when first opened.
        checked = None if remote.is_remote(path) else shards
        common = {"dtype": np.dtype(tokens.dtype), "eos_id": tokens.eos_id, "vocab_size": tokens.vocab_size}
        if kind == "array_record":
            direct = (path, shards) if by_record and remote.is_remote(path) else None
            return TokenRecords(files, field=field, pieces=pieces, shards=checked, by_record=direct, **common)
        return TokenColumn(files, column=field, pieces=pieces, shards=checked, ranged=ranged, **common)
    if not formats.exists(path):
        raise FileNotFoundError(f"no token corpus at {path}")
    if path.endswith(".bin"):
        return TokenBytes(path)  # it reads the meta.json beside the path, not beside a cached copy
    # A gs:// shard is checked as it is fetched; a local one when it is first opened.
    single = formats.single_file(path)
    sibling, shard = single.tokens or {}, single.shard
    common = {
        "dtype": np.dtype(sibling.get("dtype", "uint16")),
        "eos_id": sibling.get("eos_id"),
        "vocab_size": sibling.get("vocab_size"),
        "shards": None if shard is None or remote.is_remote(path) else [shard],
    }
    path = single.local
    if path.endswith(".array_record"):
        return TokenRecords([path], field=field, **common)
    if path.endswith(".parquet"):
        return TokenColumn([path], column=field, **common)
    raise ValueError(f"{path}: a token corpus is a committed directory or a .bin, .array_record or .parquet file")


def check_one_tokenizer(paths: list[str]) -> None:
    """Refuses a mixture whose corpora were tokenized differently, by their meta.json."""
    metas: Mapping[str, formats.Meta] = {p: m for p in paths if (m := corpus_meta(p)) is not None}
    formats.check_same_tokenizer(metas)

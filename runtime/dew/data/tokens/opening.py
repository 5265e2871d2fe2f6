"""Opening a token corpus by path: a committed directory, or a single .bin/.array_record/.parquet file."""

from __future__ import annotations

import os
from collections.abc import Mapping
from typing import Any

import numpy as np

from dew.data import committed, formats, locations, ranges, remote, shard_cache
from dew.data.committed_records import shard_files
from dew.data.pieces import offline_pieces
from dew.data.sections import TokensSection
from dew.data.tokens.sources import TokenSource
from dew.data.tokens.token_bytes import TokenBytes
from dew.data.tokens.token_column import TokenColumn
from dew.data.tokens.token_records import TokenRecords


def corpus_meta(path: str) -> formats.Meta | None:
    """meta.json of a token corpus directory; None for a single file (a directory must be committed,
    and hold tokens)."""
    return formats.read_meta(path, kind="tokens") if locations.is_directory(path) else None


def open_tokens(path: str, *, split: str = "train", field: str | None = None) -> TokenSource:
    """The token stream of `split` of a committed corpus directory, or of a single file, by its kind."""
    meta = corpus_meta(path)
    if meta is not None:
        shards = meta.shards(split)
        if not shards:
            raise ValueError(f"{path}: split {split!r} holds no shards")
        kinds = {formats.shard_extension(s.name) for s in shards}
        if len(kinds) != 1:
            raise ValueError(f"{path}: split {split!r} mixes shard kinds {sorted(kinds)}")
        kind = kinds.pop()
        if kind == "bin":
            return TokenBytes(path, split=split)
        tokens = meta.tokens
        # Records read without a field are raw ids, which the index names "".
        pieces = offline_pieces(path, meta, split, (field or "") if kind == "array_record" else field)
        common: dict[str, Any] = {
            "dtype": np.dtype(tokens.dtype),
            "eos_id": tokens.eos_id,
            "vocab_size": tokens.vocab_size,
            "pieces": pieces,
        }
        hold = shard_cache.Hold()
        source: TokenRecords | TokenColumn
        if kind == "array_record":
            # Read as images and clips are (dew.data.record_shards): a shard is checked when first opened,
            # a local one hashed, a gs:// one fetched whole, or by range when it carries a record index.
            files = shard_files(path, shards)
            source = TokenRecords(files, field=field, shards=shards, directory=path, **common)
        else:
            ranged = None
            if remote.is_remote(path) and all(ranges.is_ranged(s) for s in shards):
                # Footers and row groups read by range, every block checked (dew.data.ranges).
                files = [os.path.join(path, s.name) for s in shards]
                ranged = [ranges.RangedShard(f, s) for f, s in zip(files, shards, strict=True)]
            else:  # a gs:// shard without block checksums is fetched whole, and kept while the source lives
                files = [formats.verify_shard(path, s, holder=hold) for s in shards]
            # A gs:// shard was checked as it was fetched; a local one is checked when first opened.
            checked = None if remote.is_remote(path) else shards
            source = TokenColumn(files, column=field, shards=checked, ranged=ranged, **common)
        _check_records(path, shards, source)
        source.hold = hold
        return source
    if not locations.exists(path):
        raise FileNotFoundError(f"no token corpus at {path}")
    if path.endswith(".bin"):
        return TokenBytes(path)  # it reads the meta.json beside the path, not beside a cached copy
    # A gs:// shard is checked as it is fetched; a local one when it is first opened.
    single = locations.single_file(path)
    sibling, shard = single.tokens or {}, single.shard
    common = {
        "dtype": np.dtype(sibling.get("dtype", "uint16")),
        "eos_id": sibling.get("eos_id"),
        "vocab_size": sibling.get("vocab_size"),
        "shards": None if shard is None or remote.is_remote(path) else [shard],
    }
    path = single.local
    opened: TokenRecords | TokenColumn
    if path.endswith(".array_record"):
        opened = TokenRecords([path], field=field, **common)
    elif path.endswith(".parquet"):
        opened = TokenColumn([path], column=field, **common)
    else:
        raise ValueError(f"{path}: a token corpus is a committed directory or a .bin, .array_record or .parquet file")
    opened.hold = single.hold
    return opened


def _check_records(directory: str, shards: tuple[formats.Shard, ...], source: TokenRecords | TokenColumn) -> None:
    """Refuses a shard whose own record count is not meta.json's, naming it. The source's piece counts
    are the shards' own: parquet footers read as it was built, ArrayRecord footers counted by its scan,
    or an offline index (checked against meta.json when loaded) that each footer must match when opened."""
    assert source.pieces is not None  # every source has its piece index once built
    for shard, found in zip(shards, source.pieces.counts.tolist(), strict=True):
        committed.check_records(os.path.join(directory, shard.name), int(found), shard.records)


def check_one_tokenizer(paths: list[str]) -> None:
    """Refuses a mixture whose corpora were tokenized differently, by their meta.json: a directory's own, or
    the one beside a corpus named by a data file (a file with none, nanoGPT's, names no tokenizer)."""
    metas: Mapping[str, formats.Meta] = {p: m for p in paths if (m := _recorded_meta(p)) is not None}
    check_same_tokenizer(metas)


def _recorded_meta(path: str) -> formats.Meta | None:
    meta = corpus_meta(path)
    if meta is not None:
        return meta
    where, data = locations.sibling_json(path)
    return formats.Meta.from_json(data, where=where) if locations.is_dew_meta(data) else None


def check_same_tokenizer(metas: Mapping[str, formats.Meta]) -> None:
    """Refuses to mix corpora whose ids mean different tokens."""
    sections = {path: m.expect(TokensSection.KIND, path) for path, m in metas.items()}
    kinds = {(t.tokenizer, t.tokenizer_hash, t.vocab_size) for t in sections.values()}  # type: ignore[attr-defined]
    if len(kinds) > 1:
        listing = "; ".join(
            f"{path}: {t.tokenizer} ({t.tokenizer_hash[:12]})"  # type: ignore[attr-defined]
            for path, t in sorted(sections.items())
        )
        raise ValueError(
            f"these corpora come from different tokenizers, so their ids mean different tokens: {listing}. "
            "Tokenize every corpus of a mixture with one tokenizer."
        )

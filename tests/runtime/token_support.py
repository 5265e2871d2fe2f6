"""Tiny committed token corpora for the token tests, written the way the preprocess jobs write them."""

from __future__ import annotations

import os
from collections.abc import Mapping, Sequence

import numpy as np
import pyarrow as pa
import pyarrow.parquet as pq

from dew.data import block_sums, formats, integrity, record_index
from dew.data.sections import TokensSection

EOS = 0


def documents(count: int, *, seed: int = 0, longest: int = 40, base: int = 1) -> list[np.ndarray]:
    """`count` documents of ids >= 1 each closed by EOS; ids tell documents apart (doc d starts at base + d)."""
    rng = np.random.default_rng(seed)
    docs = []
    for d in range(count):
        body = (base + d + np.arange(int(rng.integers(0, longest)))) % 60000 + 1
        docs.append(np.append(body, EOS).astype(np.int64))
    return docs


def write_corpus(
    directory: str,
    splits: Mapping[str, Sequence[np.ndarray]],
    *,
    kind: str = "bin",
    shards: int = 2,
    dtype: str = "uint16",
    eos_id: int | None = EOS,
    tokenizer: str = "byte-test",
    field: str | None = None,
    block_bytes: int = 0,
    blocks_version: int = block_sums.BLOCKS_VERSION,
    groups: Sequence[int] | None = None,
) -> str:
    """Writes each split's documents as `shards` shards of `kind` plus meta.json, and returns the directory.

    With block_bytes, each shard's block checksums too, through the writers' own Digest, and an ArrayRecord
    shard's record index through their own walk, as every dew job now writes them; without, meta.json is
    the older format, which has neither. blocks_version=1 writes `.blocks` the way writers did before the
    two-level layout (dew.data.block_sums): the checksums alone, meta.json recording no blocks_version.
    groups, when given, is each shard's document count instead of `shards` even groups (an empty shard
    between two others, as tokenize writes where one document spans a shard's whole share)."""
    os.makedirs(directory, exist_ok=True)
    meta_splits = {}
    for split, docs in splits.items():
        if groups is None:
            groups_of = np.array_split(np.arange(len(docs)), shards)
        else:
            groups_of = np.split(np.arange(len(docs)), np.cumsum(groups)[:-1])
            shards = len(groups_of)
        entries = []
        for index, group in enumerate(groups_of):
            name = formats.shard_name(split, index, shards, kind)
            path = os.path.join(directory, name)
            chunk = [np.asarray(docs[i]) for i in group]
            ids = np.concatenate(chunk) if chunk else np.zeros(0, dtype=np.int64)
            if kind == "bin":
                ids.astype(dtype).tofile(path)
            elif kind == "array_record":
                from array_record.python.array_record_module import ArrayRecordWriter

                writer = ArrayRecordWriter(path, "group_size:1")
                for doc in chunk:
                    raw = doc.astype(dtype).tobytes()
                    writer.write(raw if field is None else pack({field: raw, "other": b"x"}))
                writer.close()
            else:
                table = pa.table({field or "ids": pa.array([d.tolist() for d in chunk], type=pa.list_(pa.int64()))})
                pq.write_table(table, path, row_group_size=3)
            blocks = {}
            if block_bytes:
                digest = integrity.Digest(block_bytes=block_bytes)
                with open(path, "rb") as f:
                    digest.update(f.read())
                sidecar, crc = (digest.blocks, integrity.digest_bytes(digest.blocks))
                if blocks_version == block_sums.BLOCKS_VERSION:
                    sidecar, crc = block_sums.sidecar(digest.blocks, block_bytes)
                    blocks["blocks_version"] = blocks_version
                with open(os.path.join(directory, name + formats.BLOCKS_SUFFIX), "wb") as f:
                    f.write(sidecar)
                blocks.update(block_bytes=block_bytes, blocks_crc32c=crc)
                blocks["crc32c"] = digest.crc32c
                with open(path, "rb") as f:
                    index = record_index.index_of(f.read())  # the writers' own walk; b"" but for ArrayRecord
                if index:
                    with open(os.path.join(directory, record_index.index_name(name)), "wb") as f:
                        f.write(index)
                    blocks["index_version"] = record_index.INDEX_VERSION
                    blocks["index_crc32c"] = integrity.digest_bytes(index)
            entries.append(
                formats.Shard(
                    name=name,
                    records=len(chunk),
                    units=int(ids.size),
                    bytes=os.path.getsize(path),
                    sha256=formats.sha256_file(path),
                    **blocks,
                )
            )
        meta_splits[split] = tuple(entries)
    vocab = 60001 if dtype == "uint16" else 70000
    section = TokensSection(
        tokenizer=tokenizer, tokenizer_hash=tokenizer * 4, vocab_size=vocab, dtype=dtype, eos_id=eos_id
    )
    meta = formats.Meta(section=section, splits=meta_splits)
    formats.write_meta(directory, meta)
    return directory


def pack(entries: Mapping[str, bytes]) -> bytes:
    """The packed dict of byte arrays layout: (uint32 key length, key, uint32 value length, value) each."""
    out = bytearray()
    for key, value in entries.items():
        encoded = key.encode()
        out += len(encoded).to_bytes(4, "little") + encoded + len(value).to_bytes(4, "little") + value
    return bytes(out)


def stream_of(docs: Sequence[np.ndarray]) -> np.ndarray:
    return np.concatenate([np.asarray(d) for d in docs]) if docs else np.zeros(0, dtype=np.int64)

"""Token readers check meta.json's record count of every shard against the shard's own (its footer, or
the piece index derived from it, or a .bin shard's eos ids) when they open it, naming the shard, with or
without an index."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats, integrity
from dew.data.tokens import bin_documents
from dew.data.tokens.opening import open_tokens
from dew.data.tokens.token_bytes import TokenBytes
from tests.runtime.test_committed import rewrite_records
from tests.runtime.test_tokens_pieces import DOCS, SHARDS, index_path, indexed_corpus
from tests.runtime.token_support import write_corpus

pytest.importorskip("array_record")
pytest.importorskip("pyarrow")


@pytest.mark.parametrize("kind", ["array_record", "parquet"])
@pytest.mark.parametrize("delta", [-1, 1])
@pytest.mark.parametrize("indexed", [True, False])
def test_a_record_count_unlike_the_shards_own_is_refused_naming_the_shard(tmp_path, kind, delta, indexed) -> None:
    directory = indexed_corpus(str(tmp_path), kind)
    if not indexed:
        os.remove(index_path(directory))  # the reader scans the shards for their counts
    name = rewrite_records(Path(directory), "train", 1, delta)
    held = len(SHARDS[1])
    said = (
        rf"{os.path.join(directory, name)} holds {held} records by its own footer, but meta.json records {held + delta}"
        if not indexed
        else rf"disagrees with meta.json on the records or units of split 'train'\'s shard {name}"
    )
    with pytest.raises(formats.DamagedError, match=said):
        open_tokens(directory, field="ids" if kind == "parquet" else None)


@pytest.mark.parametrize("kind", ["array_record", "parquet"])
def test_counts_that_agree_read_every_document_as_written(tmp_path, kind) -> None:
    directory = indexed_corpus(str(tmp_path), kind)
    source = open_tokens(directory, field="ids" if kind == "parquet" else None)
    np.testing.assert_array_equal(source[0 : len(source)], np.concatenate(DOCS))


def _bin_corpus(directory: str, tokenizer: str, eos_id: int, docs: list[np.ndarray]) -> str:
    return write_corpus(directory, {"train": docs, "val": docs[:3]}, kind="bin", tokenizer=tokenizer, eos_id=eos_id)


def _byte_documents(count: int) -> list[np.ndarray]:
    """Documents as dew's byte tokenizer writes them: ids 0..255, each closed by its eos, 256."""
    rng = np.random.default_rng(3)
    return [np.append(rng.integers(0, 256, int(rng.integers(0, 30))), 256).astype(np.int64) for _ in range(count)]


@pytest.mark.parametrize(
    ("tokenizer", "eos_id", "delta", "refused"),
    [
        ("byte", 256, 1, True),  # no text encodes to 256: the shard's eos ids are exactly its documents
        ("byte", 256, -1, True),
        ("gpt2-like", 0, 1, True),  # text may encode to the eos: meta.json may count fewer, never more
        ("gpt2-like", 0, -1, False),
    ],
)
def test_a_bin_shard_whose_documents_are_not_meta_jsons_count_is_refused_on_first_open(
    tmp_path, tokenizer, eos_id, delta, refused
) -> None:
    docs = _byte_documents(20) if tokenizer == "byte" else DOCS
    directory = _bin_corpus(str(tmp_path / "corpus"), tokenizer, eos_id, docs)
    name = rewrite_records(Path(directory), "train", 1, delta)  # meta.json's own checksum recomputed
    held = len(np.array_split(np.arange(len(docs)), 2)[1])
    source = TokenBytes(directory)  # the checksum is intact: only the count can tell
    first = int(source.ends[0])
    np.testing.assert_array_equal(source[0:first], np.concatenate(docs)[:first])  # shard 0 still reads
    if not refused:
        np.testing.assert_array_equal(source[0 : len(source)], np.concatenate(docs))
        return
    said = (
        rf"{directory}: shard {name} of split 'train' holds {held} documents by its eos ids \(id {eos_id}, "
        rf"{'exactly' if tokenizer == 'byte' else 'at least'} its documents\), but meta.json records {held + delta}"
    )
    with pytest.raises(formats.DamagedError, match=said):
        source[first : first + 1]
    with pytest.raises(formats.DamagedError, match=said):  # the single shard read out of its directory too
        TokenBytes(os.path.join(directory, name))[0:1]


def test_an_intact_bin_corpus_reads_every_document_and_literal_eos_ids_are_allowed(tmp_path) -> None:
    docs = [d.copy() for d in DOCS]
    docs[4] = np.concatenate([docs[4][:-1], [0, 7, 0]])  # a literal eos string in a document's text
    directory = _bin_corpus(str(tmp_path / "corpus"), "gpt2-like", 0, docs)
    for split, written in (("train", docs), ("val", docs[:3])):
        source = TokenBytes(directory, split=split)
        np.testing.assert_array_equal(source[0 : len(source)], np.concatenate(written))
    again = TokenBytes(directory)  # the verdict is cached: a second open reads the same
    np.testing.assert_array_equal(again[0 : len(again)], np.concatenate(docs))


def test_a_local_bin_shard_is_read_once_on_first_open_its_documents_counted_in_its_checksums_read(
    tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))  # no verdict from another test
    directory = _bin_corpus(str(tmp_path / "corpus"), "gpt2-like", 0, DOCS)
    hashed, counted = [], []
    digest_file, documents_of = integrity.digest_file, bin_documents.documents_of
    monkeypatch.setattr(integrity, "digest_file", lambda *a: hashed.append(a) or digest_file(*a))
    monkeypatch.setattr(bin_documents, "documents_of", lambda *a: counted.append(a) or documents_of(*a))
    source = TokenBytes(directory)
    np.testing.assert_array_equal(source[0 : len(source)], np.concatenate(DOCS))
    assert [os.path.basename(a[0]) for a in hashed] == [s.name for s in formats.read_meta(directory).shards("train")]
    assert all(a[2] is not None for a in hashed) and not counted, "one read a shard, for checksum and count"
    again = TokenBytes(directory)
    np.testing.assert_array_equal(again[0 : len(again)], np.concatenate(DOCS))
    assert len(hashed) == 2, "both verdicts cached together: nothing read again"


@pytest.mark.parametrize("tail", [False, True])
def test_the_count_taken_in_chunks_is_the_readers(tail) -> None:
    ids = np.concatenate(DOCS + ([np.array([5, 6])] if tail else [])).astype(np.uint16)
    found = bin_documents.documents_of(ids, 0)
    assert found == len(DOCS) + tail
    name, raw = "train-00000-of-00001.bin", ids.tobytes()
    shard = formats.Shard(name, found + 1, int(ids.size), len(raw), "")  # one more than it holds: refused
    passing = bin_documents.DocumentPass(np.dtype(np.uint16), bin_documents.Counted("c", "train", shard, 0, "bpe"))
    for at in range(0, len(raw), 7):  # chunks that split ids: the pass carries the odd byte over
        passing.update(raw[at : at + 7])
    with pytest.raises(formats.DamagedError, match=rf"holds {found} documents by its eos ids"):
        passing.finish()

"""The offline piece index: used without a scan when it matches the corpus, recomputed when stale, refused broken."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, Loading, TokenWindows, formats
from dew.data.pieces import PIECES, PieceIndex, offline_pieces
from dew.data.tokens.opening import open_tokens
from dew.data.tokens.token_column import TokenColumn
from dew.data.tokens.token_records import TokenRecords
from tests.runtime.token_support import documents, stream_of, write_corpus
from tests.support import assert_resume_exact

SERIAL = Loading(workers=0, threads=2, read_buffer=8)
KINDS = ("array_record", "parquet")
SOURCES = {"array_record": TokenRecords, "parquet": TokenColumn}
DOCS = documents(50)
SHARDS = np.array_split(np.arange(len(DOCS)), 3)


def known_index(kind: str) -> PieceIndex:
    """The index of write_corpus's shards, from the documents themselves rather than from any reader."""
    lengths = [np.array([len(DOCS[i]) for i in group], dtype=np.int64) for group in SHARDS]
    return PieceIndex.of_lengths(lengths, field="ids" if kind == "parquet" else "")


def index_path(directory: str) -> str:
    return formats.derived_path(directory, "train", PIECES)


def fingerprint(directory: str) -> str:
    return formats.read_meta(directory).fingerprint()


def indexed_corpus(root: str, kind: str) -> str:
    """A committed corpus of DOCS in three shards with its offline piece index beside them."""
    directory = write_corpus(os.path.join(root, kind), {"train": DOCS}, kind=kind, shards=3)
    known_index(kind).save(index_path(directory), fingerprint(directory))
    return directory


@pytest.fixture
def corpus(tmp_path, request) -> str:
    """One for a test to change."""
    return indexed_corpus(str(tmp_path), request.param)


@pytest.fixture(scope="module")
def shared(tmp_path_factory) -> dict[str, str]:
    """One per kind, read only, for the property tests."""
    root = str(tmp_path_factory.mktemp("pieces"))
    return {kind: indexed_corpus(root, kind) for kind in KINDS}


def kind_of(directory: str) -> str:
    return os.path.basename(directory)


def forbid_scans(monkeypatch) -> None:
    def refuse(*_, **__):
        raise AssertionError("the source scanned its shards although an offline piece index matches them")

    for source in SOURCES.values():
        monkeypatch.setattr(source, "scan", refuse)


@pytest.mark.parametrize("corpus", KINDS, indirect=True)
def test_the_scan_builds_the_index_the_documents_give(corpus) -> None:
    os.remove(index_path(corpus))
    source = open_tokens(corpus)
    assert source.pieces == known_index(kind_of(corpus))
    np.testing.assert_array_equal(source[0 : len(source)], stream_of(DOCS))


@pytest.mark.parametrize("corpus", KINDS, indirect=True)
def test_a_matching_offline_index_is_used_without_a_scan(corpus, monkeypatch) -> None:
    forbid_scans(monkeypatch)
    source = open_tokens(corpus)
    assert source.pieces == known_index(kind_of(corpus))
    np.testing.assert_array_equal(source[0 : len(source)], stream_of(DOCS))
    spec = TokenWindows(path=corpus, seq_len=16, val_batches=0, loading=SERIAL)
    with spec.load(batch=4).train(DataPartition()) as stream:
        first = next(stream)["text"]
    ids = stream_of(DOCS)
    windows = {tuple(ids[k : k + 17].tolist()) for k in range(0, len(ids) - 16, 16)}
    assert first.shape == (4, 17) and all(tuple(row.tolist()) in windows for row in first)


@pytest.mark.parametrize("kind", KINDS)
@given(start=st.integers(0, 1100), size=st.integers(0, 200))
@settings(max_examples=25, deadline=None)
def test_spans_through_the_offline_index_equal_the_stream(shared, kind: str, start: int, size: int) -> None:
    source = pickle.loads(pickle.dumps(open_tokens(shared[kind])))  # a worker reopens what it is sent
    np.testing.assert_array_equal(source[start : start + size], stream_of(DOCS)[start : start + size])


@pytest.mark.parametrize("kind", KINDS)
@given(stop_at=st.integers(1, 6), shares=st.sampled_from([1, 2]), new_shares=st.sampled_from([1, 2, 4]))
@settings(max_examples=6, deadline=None)
def test_windows_over_the_offline_index_resume_exactly(shared, kind: str, stop_at, shares, new_shares) -> None:
    data = TokenWindows(path=shared[kind], seq_len=8, val_batches=0, loading=SERIAL).load(batch=4)
    assert_resume_exact(data.train, steps=8, stop_at=stop_at, count_before=shares, count_after=new_shares)


@pytest.mark.parametrize("corpus", KINDS, indirect=True)
def test_an_index_of_another_corpus_is_ignored_and_recomputed(corpus, monkeypatch) -> None:
    wrong = PieceIndex.of_lengths([np.ones(n, dtype=np.int64) for n in map(len, SHARDS)], field="ids")
    wrong.save(index_path(corpus), "another corpus")
    assert offline_pieces(corpus, formats.read_meta(corpus), "train", None) is None
    scans = []
    for source in SOURCES.values():
        original = source.scan
        monkeypatch.setattr(source, "scan", lambda self, *a, original=original: scans.append(1) or original(self, *a))
    source = open_tokens(corpus)
    assert scans == [1] and source.pieces == known_index(kind_of(corpus))


@pytest.mark.parametrize("corpus", KINDS, indirect=True)
def test_a_corrupt_index_is_refused_by_name(corpus) -> None:
    with open(index_path(corpus), "wb") as f:
        f.write(b"PK\x03\x04 torn in the middle of a write")
    with pytest.raises(ValueError, match=r"train\.pieces\.npz is not a readable .*delete it"):
        open_tokens(corpus)


@pytest.mark.parametrize("corpus", KINDS, indirect=True)
def test_an_index_that_disagrees_with_meta_is_refused_by_name(corpus) -> None:
    good = known_index(kind_of(corpus))
    shifted = PieceIndex(ends=good.ends + 1, counts=good.counts, field=good.field)
    shifted.save(index_path(corpus), fingerprint(corpus))
    with pytest.raises(ValueError, match=r"train\.pieces\.npz disagrees with meta\.json"):
        open_tokens(corpus)


@pytest.mark.parametrize("corpus", ["array_record"], indirect=True)
def test_an_index_of_raw_records_does_not_apply_to_a_field(corpus) -> None:
    meta = formats.read_meta(corpus)
    assert offline_pieces(corpus, meta, "train", "") == known_index("array_record")
    assert offline_pieces(corpus, meta, "train", "ids") is None


def test_packed_records_are_indexed_by_their_field(tmp_path, monkeypatch) -> None:
    directory = write_corpus(str(tmp_path / "packed"), {"train": DOCS}, kind="array_record", shards=3, field="ids")
    files = [os.path.join(directory, s.name) for s in formats.read_meta(directory).shards("train")]
    scanned = TokenRecords(files, field="ids").pieces
    lengths = np.diff(np.concatenate([[0], known_index("array_record").ends]))
    assert scanned == PieceIndex(ends=np.cumsum(lengths), counts=known_index("array_record").counts, field="ids")
    scanned.save(index_path(directory), fingerprint(directory))
    forbid_scans(monkeypatch)
    np.testing.assert_array_equal(open_tokens(directory, field="ids")[0:100], stream_of(DOCS)[:100])


@pytest.mark.parametrize("kind", KINDS)
def test_a_source_refuses_an_index_of_other_files(tmp_path, kind: str) -> None:
    directory = write_corpus(str(tmp_path / kind), {"train": DOCS}, kind=kind, shards=3)
    files = [os.path.join(directory, s.name) for s in formats.read_meta(directory).shards("train")]
    two_files = PieceIndex.of_lengths([np.ones(3, dtype=np.int64)] * 2, field=known_index(kind).field)
    with pytest.raises(ValueError, match="piece index"):
        SOURCES[kind](files, pieces=two_files)


def test_an_array_record_shard_with_other_record_counts_is_refused_on_open(tmp_path) -> None:
    directory = write_corpus(str(tmp_path / "ar"), {"train": DOCS}, kind="array_record", shards=3)
    files = [os.path.join(directory, s.name) for s in formats.read_meta(directory).shards("train")]
    good = known_index("array_record")
    moved = np.array([good.counts[0] + 1, good.counts[1] - 1, good.counts[2]])
    source = TokenRecords(files, pieces=PieceIndex(ends=good.ends, counts=moved))
    with pytest.raises(ValueError, match=r"train-00000-of-00003\.array_record holds \d+ records but its piece index"):
        source[0:10]


def test_piece_index_validates_itself(tmp_path) -> None:
    with pytest.raises(ValueError, match="add up"):
        PieceIndex(ends=np.array([1, 2]), counts=np.array([1]))
    # The order of the ends is the writer's to check: a reader maps the file and never scans it.
    with pytest.raises(ValueError, match="never decrease"):
        PieceIndex(ends=np.array([3, 2]), counts=np.array([2])).save(str(tmp_path / "train.pieces.npz"), "fp")
    with pytest.raises(ValueError, match="negative length"):
        PieceIndex.of_lengths([np.array([3, -1])])
    with pytest.raises(ValueError, match="integers"):
        PieceIndex(ends=np.array([1.5]), counts=np.array([1]))
    empty = PieceIndex.of_lengths([np.zeros(0, dtype=np.int64), np.array([4, 0, 2])])
    assert empty.shard_ends.tolist() == [0, 6] and empty.shard_piece_ends.tolist() == [0, 3]

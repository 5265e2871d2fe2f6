"""Derived files are read in place, not loaded: a large array is a FileArray that reads the blocks asked
for (the same answers as numpy, a bounded cache, never the whole file on a reader's path), shared with
worker processes by reference, checked once per host against their zip CRC-32s; the .npz files older
dews wrote still read."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import formats, npz, paged
from dew.data.packing import DOCUMENTS, PackingPlan, load_document_ends, plan_packing, save_document_ends
from dew.data.pieces import PIECES, PieceIndex
from dew.data.tokens.documents import PackedWindowSource, TokenDocumentSource
from dew.data.tokens.token_bytes import TokenBytes

ENDS = np.cumsum(np.arange(1, 2001, dtype=np.int64))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> None:
    """A verification cache of this test's own, so no test sees another's verdicts; and every array paged,
    however small, so these small files take the path a pod-scale index takes."""
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.setattr(npz, "PAGED_FROM", 0)


def documents_file(directory: str) -> str:
    path = formats.derived_path(directory, "train", DOCUMENTS)
    save_document_ends(path, "fp", ENDS)
    return path


def test_a_derived_file_is_paged_aligned_and_still_an_npz(tmp_path) -> None:
    path = documents_file(str(tmp_path))
    ends = load_document_ends(path, "fp")
    assert isinstance(ends, paged.FileArray) and ends.where.offset % 64 == 0
    np.testing.assert_array_equal(ends, ENDS)
    with np.load(path) as data:  # any numpy, an older dew's included, reads what this one writes
        np.testing.assert_array_equal(data["ends"], ENDS)
        assert str(data["role"]) == DOCUMENTS
    # What is read from a paged array is a plain array.
    assert type(ends[3:7]) is np.ndarray and type(ends[[1, 2]]) is np.ndarray


def test_small_members_are_read_at_open_and_large_ones_paged(tmp_path, monkeypatch) -> None:
    monkeypatch.setattr(npz, "PAGED_FROM", ENDS.nbytes + 1)
    assert type(load_document_ends(documents_file(str(tmp_path)), "fp")) is np.ndarray
    monkeypatch.setattr(npz, "PAGED_FROM", ENDS.nbytes)
    assert isinstance(load_document_ends(documents_file(str(tmp_path)), "fp"), paged.FileArray)


def paged_copy(directory: str, values: np.ndarray) -> paged.FileArray:
    path = os.path.join(directory, f"a{len(os.listdir(directory))}.npz")
    npz.write_arrays(path, {"values": values})
    array = npz.open_arrays(path)["values"]
    assert isinstance(array, paged.FileArray)
    return array


@settings(max_examples=60, deadline=None)
@given(
    size=st.integers(0, 3000),
    data=st.data(),
)
def test_a_paged_array_answers_as_numpy_does(tmp_path_factory, size, data) -> None:
    values = np.cumsum(np.random.default_rng(size).integers(0, 3, size=size)).astype(np.int64)
    array = paged_copy(str(tmp_path_factory.mktemp("paged")), values)
    index = st.integers(-size - 2, size + 1)
    for key in data.draw(st.lists(index, max_size=5)):
        if -size <= key < size:
            assert array[key] == values[key]
        else:
            with pytest.raises(IndexError):
                array[key]
    slices = st.builds(slice, st.none() | index, st.none() | index, st.none() | st.sampled_from([1, 2, 7, -1, -3]))
    for key in data.draw(st.lists(slices, max_size=5)):
        np.testing.assert_array_equal(array[key], values[key])
    if size:
        gathered = data.draw(st.lists(st.integers(-size, size - 1), max_size=40))
        np.testing.assert_array_equal(array[np.array(gathered, dtype=np.int64)], values[gathered])
        matrix = np.array(gathered[: len(gathered) // 2 * 2], dtype=np.int64).reshape(-1, 2)
        np.testing.assert_array_equal(array[matrix], values[matrix])
    wanted = data.draw(st.lists(st.integers(-2, int(values[-1]) + 2 if size else 2), max_size=10))
    for side in ("left", "right"):
        np.testing.assert_array_equal(array.searchsorted(wanted, side=side), np.searchsorted(values, wanted, side))
        for value in wanted[:3]:
            assert array.searchsorted(value, side=side) == np.searchsorted(values, value, side)


def test_a_paged_array_holds_little_and_is_never_read_whole_by_lookups(tmp_path, monkeypatch) -> None:
    values = np.arange(2_000_000, dtype=np.int64) * 3  # 16 MB
    array = paged_copy(str(tmp_path), values)
    before = paged.FileArray.whole_reads
    rng = np.random.default_rng(0)
    for _ in range(200):
        rows = rng.integers(0, len(values), size=64)
        np.testing.assert_array_equal(array[rows], values[rows])
        assert array.searchsorted(int(values[rows[0]]) + 1) == rows[0] + 1
        start = int(rows[1])
        np.testing.assert_array_equal(array[start : start + 5000], values[start : start + 5000])
    assert paged.FileArray.whole_reads == before
    assert len(array._probes) <= paged.FileArray.PROBES
    np.testing.assert_array_equal(np.asarray(array), values)  # what planning does: counted
    assert paged.FileArray.whole_reads == before + 1


def test_a_truncated_file_is_refused_by_name(tmp_path) -> None:
    array = paged_copy(str(tmp_path), np.arange(5000, dtype=np.int64))
    os.truncate(array.where.path, array.where.offset + 8 * 100)
    with pytest.raises(ValueError, match=r"a0\.npz ends before the 5000 items"):
        array[4000]


def test_the_same_arrays_give_the_same_bytes(tmp_path) -> None:
    first, second = (str(tmp_path / name / "train.documents.npz") for name in ("a", "b"))
    for path in (first, second):
        os.makedirs(os.path.dirname(path))
        save_document_ends(path, "fp", ENDS)
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()


def test_a_paged_array_pickles_as_where_it_lies(tmp_path) -> None:
    ends = load_document_ends(documents_file(str(tmp_path)), "fp")
    sent = pickle.dumps(ends)
    assert len(sent) < 1000 < ends.nbytes
    back = pickle.loads(sent)
    assert isinstance(back, paged.FileArray)
    np.testing.assert_array_equal(back, ENDS)
    assert len(pickle.dumps(ends[:10])) < 1000  # a slice travels as its own bytes, not the file's


def test_a_worker_refuses_a_file_rewritten_after_its_parent_opened_it(tmp_path) -> None:
    path = documents_file(str(tmp_path))
    sent = pickle.dumps(load_document_ends(path, "fp"))
    save_document_ends(path, "fp", ENDS + 1)
    with pytest.raises(ValueError, match="changed after this process's parent opened it"):
        pickle.loads(sent)


def test_packed_windows_travel_to_workers_without_their_index(tmp_path) -> None:
    lengths = np.diff(ENDS, prepend=0)
    tokens = str(tmp_path / "tokens.bin")
    np.zeros(int(ENDS[-1]), dtype=np.uint16).tofile(tokens)
    plan_path = formats.derived_path(str(tmp_path), "train", "packing-bf1-65-4")
    plan_packing(lengths, 65, 4).save(plan_path, "fp")
    plan = PackingPlan.load(plan_path, "fp")
    source = PackedWindowSource(
        TokenDocumentSource(TokenBytes(tokens), ends=load_document_ends(documents_file(str(tmp_path)), "fp")), plan
    )
    index_bytes = plan.offsets.nbytes + plan.documents.nbytes + plan.starts.nbytes + plan.lengths.nbytes
    sent = pickle.dumps(source)
    assert len(sent) < index_bytes // 10
    again = pickle.loads(sent)
    windows = np.array([0, 5, len(plan) - 1])
    for key, value in source.read_batch(windows).items():
        np.testing.assert_array_equal(again.read_batch(windows)[key], value)
    want = [int(plan.lengths[plan.offsets[w] : plan.offsets[w + 1]].sum()) for w in windows]
    assert again.tokens_in(windows).tolist() == want


def test_an_npz_an_older_dew_wrote_still_reads(tmp_path) -> None:
    """np.savez (what dew wrote before) stores members unaligned; they read in place all the same."""
    path = formats.derived_path(str(tmp_path), "train", PIECES)
    counts = np.array([1500, 500], dtype=np.int64)
    arrays = {"ends": ENDS, "counts": counts, "field": np.array("ids")}
    np.savez(path, fingerprint=np.array("fp"), split=np.array("train"), role=np.array(PIECES), **arrays)
    index = PieceIndex.load(path, "fp")
    assert index == PieceIndex(ends=ENDS, counts=counts, field="ids")
    assert isinstance(index.ends, paged.FileArray)


def test_damage_is_found_once_per_host_and_refused(tmp_path, monkeypatch) -> None:
    path = documents_file(str(tmp_path))
    hashed = []
    original = npz.member_crcs
    monkeypatch.setattr(npz, "member_crcs", lambda p: hashed.append(p) or original(p))
    for _ in range(3):
        load_document_ends(path, "fp")
    assert hashed == [path]  # the verdict is cached for this state of the file
    with open(path, "r+b") as f:
        f.seek(os.path.getsize(path) // 2)
        byte = f.read(1)
        f.seek(-1, os.SEEK_CUR)
        f.write(bytes([byte[0] ^ 0xFF]))
    with pytest.raises(ValueError, match=r"train\.documents\.npz fails its zip-crc32 check .*delete it"):
        load_document_ends(path, "fp")


def test_writers_refuse_what_readers_no_longer_scan_for(tmp_path) -> None:
    with pytest.raises(ValueError, match="rise strictly"):
        save_document_ends(str(tmp_path / "train.documents.npz"), "fp", np.array([3, 3, 5]))
    plan = PackingPlan(8, 2, np.array([0, 1, 1, 2]), np.array([0, 1]), np.array([0, 0]), np.array([3, 4]))
    with pytest.raises(ValueError, match="at least one piece"):
        plan.save(str(tmp_path / "train.packing-bf1-8-2.npz"), "fp")


def corpora(root: str) -> tuple[str, str]:
    """An ArrayRecord token corpus with its piece index, and a .bin corpus with its document index and plan."""
    from dew.data.packing import lengths_of, packing_name
    from dew.data.tokens.token_records import TokenRecords
    from tests.runtime.token_support import documents, write_corpus

    records = write_corpus(os.path.join(root, "records"), {"train": documents(3000)}, kind="array_record")
    meta = formats.read_meta(records)
    files = [os.path.join(records, s.name) for s in meta.shards("train")]
    TokenRecords(files).pieces.save(formats.derived_path(records, "train", PIECES), meta.fingerprint())
    packed = write_corpus(os.path.join(root, "packed"), {"train": documents(3000, seed=1)})
    meta = formats.read_meta(packed)
    ends = TokenDocumentSource(TokenBytes(packed)).ends
    save_document_ends(formats.derived_path(packed, "train", DOCUMENTS), meta.fingerprint(), ends)
    plan = plan_packing(lengths_of(ends), 17, 4)
    plan.save(formats.derived_path(packed, "train", packing_name(17, 4)), meta.fingerprint())
    return records, packed


def test_streams_over_paged_indexes_read_the_same_batches_without_reading_an_index_whole(tmp_path, monkeypatch):
    from dew.data import DataPartition, Loading, PackedTokens, TokenWindows

    records, packed = corpora(str(tmp_path))
    specs = [
        TokenWindows(path=records, seq_len=16, val_batches=1, loading=Loading(workers=0, threads=2)),
        PackedTokens(path=packed, seq_len=16, packing_bins=4, val_batches=1, loading=Loading(workers=0, threads=2)),
    ]

    opened: list[type] = []
    original = npz.open_arrays

    def open_arrays(path: str) -> dict:
        arrays = original(path)
        opened.extend(type(a) for a in arrays.values())
        return arrays

    monkeypatch.setattr(npz, "open_arrays", open_arrays)

    def read(spec, paged_from: int) -> list[dict[str, np.ndarray]]:
        monkeypatch.setattr(npz, "PAGED_FROM", paged_from)
        opened.clear()
        data = spec.load(batch=8)
        with data.train(DataPartition(1, 2)) as stream, data.val(DataPartition()) as val:
            return [next(stream) for _ in range(5)] + list(val)

    for spec in specs:
        loaded = read(spec, 1 << 40)
        before = paged.FileArray.whole_reads
        got = read(spec, 1024)  # every per-record array paged; a per-shard one (16 bytes here) read at open
        assert paged.FileArray in opened
        assert paged.FileArray.whole_reads == before, f"{type(spec).__name__} read a paged index whole"
        for a, b in zip(got, loaded, strict=True):
            assert a.keys() == b.keys()
            for key in a:
                np.testing.assert_array_equal(a[key], b[key])

"""Derived files are mapped, not loaded: aligned, shared with worker processes by reference, checked once
per host against their zip CRC-32s, and the .npz files older dews wrote still read."""

from __future__ import annotations

import os
import pickle

import numpy as np
import pytest

from dew.data import formats, mapped
from dew.data.packing import DOCUMENTS, PackingPlan, load_document_ends, plan_packing, save_document_ends
from dew.data.pieces import PIECES, PieceIndex
from dew.data.tokens.documents import PackedWindowSource, TokenDocumentSource
from dew.data.tokens.sources import TokenBytes

ENDS = np.cumsum(np.arange(1, 2001, dtype=np.int64))


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> None:
    """A verification cache of this test's own, so no test sees another's verdicts."""
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))


def documents_file(directory: str) -> str:
    path = formats.derived_path(directory, "train", DOCUMENTS)
    save_document_ends(path, "fp", ENDS)
    return path


def test_a_derived_file_is_mapped_aligned_and_still_an_npz(tmp_path) -> None:
    path = documents_file(str(tmp_path))
    ends = load_document_ends(path, "fp")
    assert isinstance(ends, mapped.MappedArray) and not ends.flags.writeable
    assert ends.ctypes.data % 64 == 0 and ends.flags.aligned
    np.testing.assert_array_equal(ends, ENDS)
    with np.load(path) as data:  # any numpy, an older dew's included, reads what this one writes
        np.testing.assert_array_equal(data["ends"], ENDS)
        assert str(data["role"]) == DOCUMENTS
    # What is computed or sliced from a mapped array is a plain array.
    assert type(ends[3:7]) is np.ndarray and type(ends + 1) is np.ndarray and type(ends[[1, 2]]) is np.ndarray


def test_the_same_arrays_give_the_same_bytes(tmp_path) -> None:
    first, second = (str(tmp_path / name / "train.documents.npz") for name in ("a", "b"))
    for path in (first, second):
        os.makedirs(os.path.dirname(path))
        save_document_ends(path, "fp", ENDS)
    with open(first, "rb") as a, open(second, "rb") as b:
        assert a.read() == b.read()


def test_a_mapped_array_pickles_as_where_it_lies(tmp_path) -> None:
    ends = load_document_ends(documents_file(str(tmp_path)), "fp")
    sent = pickle.dumps(ends)
    assert len(sent) < 1000 < ends.nbytes
    back = pickle.loads(sent)
    assert isinstance(back, mapped.MappedArray)
    np.testing.assert_array_equal(back, ENDS)
    assert len(pickle.dumps(ends[:10])) < 1000  # a slice travels as its own bytes, not the file's


def test_a_worker_refuses_a_file_rewritten_after_its_parent_mapped_it(tmp_path) -> None:
    path = documents_file(str(tmp_path))
    sent = pickle.dumps(load_document_ends(path, "fp"))
    save_document_ends(path, "fp", ENDS + 1)
    with pytest.raises(ValueError, match="changed after this process's parent mapped it"):
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
    """np.savez (what dew wrote before) stores members unaligned; they map all the same."""
    path = formats.derived_path(str(tmp_path), "train", PIECES)
    counts = np.array([1500, 500], dtype=np.int64)
    arrays = {"ends": ENDS, "counts": counts, "field": np.array("ids")}
    np.savez(path, fingerprint=np.array("fp"), split=np.array("train"), role=np.array(PIECES), **arrays)
    index = PieceIndex.load(path, "fp")
    assert index == PieceIndex(ends=ENDS, counts=counts, field="ids")
    assert isinstance(index.ends, mapped.MappedArray)


def test_damage_is_found_once_per_host_and_refused(tmp_path, monkeypatch) -> None:
    path = documents_file(str(tmp_path))
    hashed = []
    original = mapped.member_crcs
    monkeypatch.setattr(mapped, "member_crcs", lambda p: hashed.append(p) or original(p))
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

"""Integrity of every byte read: shards checked against meta.json on first use per host, ids checked
against the vocabulary, derived files bound to their split and role, meta.json bound to its checksum."""

from __future__ import annotations

import json
import os
import shutil
import tempfile

import numpy as np
import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dew.data import Loading, PackedTokens, TokenWindows, formats, integrity
from dew.data.packing import DOCUMENTS, PackingPlan, load_document_ends, packing_name, save_document_ends
from dew.data.pieces import PIECES, PieceIndex
from dew.data.tokens.opening import open_tokens
from tests.runtime.token_support import documents, stream_of, write_corpus

SERIAL = Loading(workers=0, threads=2, read_buffer=8)
# Hypothesis reruns a test body in one function scope; every example builds its own corpus under it.
EXAMPLES = settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
FIELD = {"bin": None, "array_record": "ids", "parquet": "ids"}


@pytest.fixture(autouse=True)
def cache(tmp_path, monkeypatch) -> str:
    """A verification cache of this test's own, so no test sees another's verdicts."""
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    monkeypatch.delenv(integrity.VERIFY_ENV, raising=False)
    return str(tmp_path / "cache")


def corpus(directory: str, kind: str = "bin", **splits) -> str:
    splits = splits or {"train": documents(40, longest=60), "val": documents(10, seed=1)}
    return write_corpus(directory, splits, kind=kind, shards=2, field=FIELD[kind])


def shard_path(directory: str, index: int = 1, split: str = "train") -> str:
    return os.path.join(directory, formats.read_meta(directory).shards(split)[index].name)


def flip(path: str, offset: int, mask: int) -> None:
    with open(path, "r+b") as f:
        f.seek(offset)
        byte = f.read(1)[0]
        f.seek(offset)
        f.write(bytes([byte ^ mask]))


def read_all(directory: str, kind: str) -> np.ndarray:
    source = open_tokens(directory, field=FIELD[kind])
    return source[:]


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
@given(at=st.floats(0, 1, exclude_max=True), mask=st.integers(1, 255))
@EXAMPLES
def test_a_flipped_byte_in_a_shard_is_refused_naming_the_shard_and_the_fix(kind, at, mask, tmp_path) -> None:
    directory = corpus(tempfile.mkdtemp(dir=tmp_path), kind)
    path = shard_path(directory)
    flip(path, int(at * os.path.getsize(path)), mask)
    with pytest.raises(ValueError, match="rerun the preprocess job with --overwrite") as error:
        read_all(directory, kind)
    assert path in str(error.value) and formats.META in str(error.value)


def test_a_flipped_byte_never_reaches_a_batch_of_token_windows_or_packed_tokens(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    flip(shard_path(directory, 0), 10, 0xFF)
    with pytest.raises(ValueError, match="--overwrite"):
        data = TokenWindows(path=directory, seq_len=7, loading=SERIAL).load(batch=4)
        next(iter(data.train(None)))
    with pytest.raises(ValueError, match="--overwrite"):
        data = PackedTokens(path=directory, seq_len=7, loading=SERIAL).load(batch=4)
        next(iter(data.train(None)))


def test_a_same_size_overwrite_is_refused_and_its_old_plan_is_not_used(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    PackedTokens(path=directory, seq_len=7, loading=SERIAL).load(batch=4)  # verified and cached
    path = shard_path(directory)
    other = np.random.default_rng(0).integers(1, 200, os.path.getsize(path) // 2).astype(np.uint16)
    other.tofile(path)
    with pytest.raises(ValueError, match="rerun the preprocess job with --overwrite") as error:
        read_all(directory, "bin")
    assert path in str(error.value)


def test_a_stale_verification_cache_is_not_trusted_after_the_file_changed(tmp_path, monkeypatch) -> None:
    directory = corpus(str(tmp_path / "c"))
    expected = read_all(directory, "bin")
    path = shard_path(directory)
    before = os.stat(path)
    flip(path, 4, 0x01)
    os.utime(path, ns=(before.st_atime_ns, before.st_mtime_ns))  # same size, same mtime: a cache keyed on those lies
    with pytest.raises(ValueError, match="--overwrite"):
        read_all(directory, "bin")
    flip(path, 4, 0x01)
    np.testing.assert_array_equal(read_all(directory, "bin"), expected)


def test_a_host_hashes_a_shard_once_and_dew_verify_0_hashes_none(tmp_path, monkeypatch) -> None:
    directory = corpus(str(tmp_path / "c"))
    hashed: list[str] = []
    digest = integrity.digest_file

    def counted(path: str, algorithm: str, feed=None) -> str:  # feed: a .bin shard's document count
        hashed.append(path)
        return digest(path, algorithm, feed)

    monkeypatch.setattr(integrity, "digest_file", counted)
    expected = read_all(directory, "bin")
    assert sorted(hashed) == sorted(shard_path(directory, i) for i in range(2))
    np.testing.assert_array_equal(read_all(directory, "bin"), expected)  # another reader of this host: cached
    assert len(hashed) == 2
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "fresh"))
    monkeypatch.setenv(integrity.VERIFY_ENV, "0")
    np.testing.assert_array_equal(read_all(directory, "bin"), expected)
    assert len(hashed) == 2


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
def test_an_id_outside_the_vocabulary_is_refused_with_shard_and_offset(kind, tmp_path) -> None:
    docs = documents(30, longest=20)
    docs[20] = docs[20].copy()
    docs[20][1:2] = 65377  # written by a broken tokenizer: the checksums agree, the vocabulary (60001) does not
    directory = corpus(str(tmp_path / "c"), kind, train=docs)
    shard = formats.read_meta(directory).shards("train")[1]
    at = int(stream_of(docs[:20]).size) + 1
    offset = at - int(stream_of(docs[:15]).size)  # shard 1 holds docs 15..29
    source = open_tokens(directory, field=FIELD[kind])
    assert source[: int(stream_of(docs[:15]).size)].max() < 60001  # shard 0 reads
    with pytest.raises(ValueError, match=f"id 65377 at offset {offset} .*vocab_size 60001") as error:
        source[:]
    assert shard.name in str(error.value)
    if kind == "bin":
        with pytest.raises(ValueError, match=f"id 65377 at offset {offset} "):
            source.spans(np.array([0, at - 3]), 9)


def test_a_derived_file_of_another_split_or_role_is_refused_naming_it(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    fingerprint = formats.read_meta(directory).fingerprint()
    val = formats.derived_path(directory, "val", DOCUMENTS)
    train = formats.derived_path(directory, "train", DOCUMENTS)
    save_document_ends(val, fingerprint, np.array([3, 9]))
    shutil.copy(val, train)
    with pytest.raises(ValueError, match="delete it") as error:
        load_document_ends(train, fingerprint)
    assert train in str(error.value) and "'val'" in str(error.value)
    with pytest.raises(ValueError, match="delete it"):
        PackedTokens(path=directory, seq_len=7, loading=SERIAL).load(batch=4)
    os.remove(train)
    os.remove(val)

    plan = formats.derived_path(directory, "train", packing_name(8, 8))
    PackedTokens(path=directory, seq_len=7, loading=SERIAL).load(batch=4)
    source = open_tokens(directory)
    from dew.data.packing import lengths_of, plan_packing

    plan_packing(lengths_of(np.flatnonzero(source[:] == 0) + 1), 8, 8).save(plan, fingerprint)
    shutil.copy(plan, formats.derived_path(directory, "train", packing_name(16, 8)))
    with pytest.raises(ValueError, match="delete it"):
        PackingPlan.load(formats.derived_path(directory, "train", packing_name(16, 8)), fingerprint)

    index = PieceIndex.of_lengths([np.array([1, 2])], field="")
    pieces = formats.derived_path(directory, "val", PIECES)
    index.save(pieces, fingerprint)
    shutil.copy(pieces, formats.derived_path(directory, "train", PIECES))
    with pytest.raises(ValueError, match="delete it"):
        PieceIndex.load(formats.derived_path(directory, "train", PIECES), fingerprint)


def test_a_flipped_byte_in_a_derived_file_is_refused_naming_it(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    fingerprint = formats.read_meta(directory).fingerprint()
    path = formats.derived_path(directory, "train", DOCUMENTS)
    save_document_ends(path, fingerprint, np.arange(1, 2000, 3))
    with open(path, "rb") as f:
        data_at = f.read().index(np.arange(1, 2000, 3).astype(np.int64).tobytes()[:64])
    flip(path, data_at + 100, 0x10)
    with pytest.raises(ValueError, match="delete it") as error:
        load_document_ends(path, fingerprint)
    assert path in str(error.value)


def test_a_hand_edited_meta_json_is_refused_naming_the_fix(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    path = os.path.join(directory, formats.META)
    with open(path) as f:
        data = json.load(f)
    assert "checksum" in data
    del data["splits"]["val"]  # drops a split, and with it its shards, silently
    with open(path, "w") as f:
        json.dump(data, f)
    with pytest.raises(ValueError, match=r"edited after the commit.*--overwrite") as error:
        formats.read_meta(directory)
    assert path in str(error.value)


def test_meta_json_without_checksum_or_crc32c_still_reads_with_the_same_fingerprint(tmp_path) -> None:
    directory = corpus(str(tmp_path / "c"))
    meta = formats.read_meta(directory)
    path = os.path.join(directory, formats.META)
    with open(path) as f:
        data = json.load(f)
    old = {key: value for key, value in data.items() if key != "checksum"}
    for shards in old["splits"].values():
        for shard in shards:
            shard.pop("crc32c", None)
    with open(path, "w") as f:
        json.dump(old, f)
    again = formats.read_meta(directory)
    assert again.fingerprint() == meta.fingerprint()
    np.testing.assert_array_equal(read_all(directory, "bin"), stream_of(documents(40, longest=60)))


def test_a_shard_records_crc32c_beside_sha256_and_the_fingerprint_ignores_it(tmp_path) -> None:
    path = tmp_path / "train-00000-of-00001.bin"
    np.arange(100, dtype=np.uint16).tofile(path)
    sha256, crc32c = integrity.digests(str(path))
    plain = formats.Shard(name=path.name, records=1, units=100, bytes=200, sha256=sha256)
    both = formats.Shard(name=path.name, records=1, units=100, bytes=200, sha256=sha256, crc32c=crc32c)
    section = formats.read_meta(corpus(str(tmp_path / "c"))).section
    metas = [formats.Meta(section=section, splits={"train": (s,)}) for s in (plain, both)]
    assert metas[0].fingerprint() == metas[1].fingerprint()
    assert "crc32c" not in metas[0].to_json()["splits"]["train"][0]
    assert formats.Meta.from_json(metas[1].to_json()) == metas[1]
    with pytest.raises(ValueError, match="crc32c"):
        formats.Shard(name=path.name, records=1, units=100, bytes=200, sha256=sha256, crc32c="xyz")


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
def test_one_shard_read_on_its_own_is_checked_against_its_directorys_meta_json(kind, tmp_path) -> None:
    """`TokenWindows(path="corpus/train-00001-of-00002.bin")` read a damaged shard without a word: the
    file branch used the sibling meta.json for its dtype only, never for the shard's size or checksum."""
    directory = corpus(str(tmp_path / "c"), kind)
    path = shard_path(directory)
    whole = open_tokens(path, field=FIELD[kind])[:]
    flip(path, os.path.getsize(path) // 2, 0x10)
    with pytest.raises(ValueError, match="rerun the preprocess job with --overwrite") as error:
        open_tokens(path, field=FIELD[kind])[:]
    assert path in str(error.value)
    if kind == "bin":
        with open(path, "r+b") as f:
            f.truncate(os.path.getsize(path) - 2)  # still whole uint16 ids, one fewer
        with pytest.raises(ValueError, match="truncated"):
            open_tokens(path)
    assert len(whole)  # the shard read fine before it was damaged

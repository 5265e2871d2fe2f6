"""gs:// corpora: meta.json read remotely, shards fetched into a bounded, checked local cache."""

from __future__ import annotations

import hashlib
import json
import multiprocessing
import os

import numpy as np
import pytest

from dew.data import formats, remote, shard_cache
from dew.data.sections import TokensSection
from tests.conftest import BUCKET
from tests.support import gcs_filesystem

pytestmark = pytest.mark.gcs


def _upload(uri: str, data: bytes) -> None:
    fs = gcs_filesystem()
    with fs.open(uri, "wb") as f:
        f.write(data)
    fs.invalidate_cache()


def _commit_corpus(root: str, tokens: np.ndarray) -> formats.Meta:
    data = tokens.astype(np.uint16).tobytes()
    name = formats.shard_name("train", 0, 1, "bin")
    _upload(f"{root}/{name}", data)
    shard = formats.Shard(
        name=name, records=1, units=len(tokens), bytes=len(data), sha256=hashlib.sha256(data).hexdigest()
    )
    section = TokensSection(tokenizer="byte", tokenizer_hash="h", vocab_size=257, dtype="uint16", eos_id=256)
    meta = formats.Meta(section=section, splits={"train": (shard,)})
    _upload(f"{root}/{formats.META}", json.dumps(meta.to_json()).encode())
    return meta


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def test_a_remote_shard_is_fetched_once_and_checked(gcs_emulator, cache) -> None:
    root = f"gs://{BUCKET}/remote-a"
    tokens = np.arange(1000) % 257
    meta = _commit_corpus(root, tokens)
    assert formats.read_meta(root) == meta
    (shard,) = meta.shards("train")
    local = formats.verify_shard(root, shard)
    assert local.startswith(cache)
    np.testing.assert_array_equal(np.fromfile(local, dtype=np.uint16), tokens)
    mtime = os.path.getmtime(local)
    assert formats.verify_shard(root, shard) == local  # a hit: same file, not downloaded again
    assert os.path.getmtime(local) >= mtime


def test_a_corrupt_remote_shard_is_refused_by_name(gcs_emulator, cache) -> None:
    root = f"gs://{BUCKET}/remote-b"
    meta = _commit_corpus(root, np.arange(100))
    (shard,) = meta.shards("train")
    _upload(f"{root}/{shard.name}", b"\0" * shard.bytes)  # same size, other content
    with pytest.raises(ValueError, match=f"{shard.name} fails its sha256 check"):
        formats.verify_shard(root, shard)
    assert not [n for _, _, names in os.walk(cache) for n in names if ".part-" in n], "a failed download was kept"


def test_an_uncommitted_remote_directory_is_refused(gcs_emulator, cache) -> None:
    with pytest.raises(FileNotFoundError, match=r"remote-none has no meta\.json"):
        formats.read_meta(f"gs://{BUCKET}/remote-none")


def _fetch(args: tuple[str, int, str]) -> str:
    uri, size, sha = args
    return shard_cache.fetch(uri, size=size, sha256=sha)


def test_worker_processes_share_one_download(gcs_emulator, cache) -> None:
    root = f"gs://{BUCKET}/remote-c"
    meta = _commit_corpus(root, np.arange(5000))
    (shard,) = meta.shards("train")
    args = (f"{root}/{shard.name}", shard.bytes, shard.sha256)
    with multiprocessing.get_context("spawn").Pool(3) as pool:
        paths = pool.map(_fetch, [args] * 6)
    assert len(set(paths)) == 1 and os.path.getsize(paths[0]) == shard.bytes


def test_the_cache_keeps_to_its_budget(gcs_emulator, cache, monkeypatch) -> None:
    os.makedirs(cache, exist_ok=True)
    block = os.statvfs(cache).f_bsize  # a cached file takes whole blocks, and one more for its checksum
    monkeypatch.setenv("DEW_CACHE_BYTES", str(7 * block))
    paths = []
    for i in range(3):
        data = bytes([i]) * 2 * block
        uri = f"gs://{BUCKET}/remote-d/{i}.bin"
        _upload(uri, data)
        paths.append(shard_cache.fetch(uri, size=len(data), sha256=hashlib.sha256(data).hexdigest()))
        assert shard_cache.held_bytes() <= 7 * block
    assert not os.path.exists(paths[0]) and all(os.path.exists(p) for p in paths[1:])
    big = b"x" * 7 * block
    with pytest.raises(OSError, match=f"cannot fit {len(big)} bytes"):
        _upload(f"gs://{BUCKET}/remote-d/big.bin", big)
        shard_cache.fetch(f"gs://{BUCKET}/remote-d/big.bin", size=len(big))


def _upload_directory(local: str, uri: str) -> None:
    for name in sorted(os.listdir(local)):
        with open(os.path.join(local, name), "rb") as f:
            _upload(f"{uri}/{name}", f.read())


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
def test_token_specs_read_a_gs_corpus_as_they_read_the_local_one(gcs_emulator, cache, tmp_path, kind) -> None:
    from dew.data import DataPartition, Loading, datasets
    from tests.runtime.token_support import documents, write_corpus
    from tests.support import assert_batches_equal

    local = write_corpus(str(tmp_path / kind), {"train": documents(60, seed=3), "val": documents(12)}, kind=kind)
    uri = f"gs://{BUCKET}/corpora/{kind}"
    _upload_directory(local, uri)
    serial = Loading(workers=0, threads=2, read_buffer=8)
    for spec in (datasets.TokenWindows, datasets.PackedTokens):
        batches = {}
        for where in (local, uri):
            data = spec(path=where, seq_len=8, loading=serial).load(batch=4)
            with data.train(DataPartition()) as stream:
                batches[where] = [next(stream) for _ in range(5)]
        assert_batches_equal(batches[local], batches[uri])


def test_a_remote_bin_corpus_fetches_only_the_shards_it_reads(gcs_emulator, cache, tmp_path) -> None:
    from dew.data import TokenBytes
    from tests.runtime.token_support import documents, write_corpus

    local = write_corpus(str(tmp_path / "lazy"), {"train": documents(40, seed=5)}, shards=4)
    uri = f"gs://{BUCKET}/corpora/lazy"
    _upload_directory(local, uri)
    tokens = TokenBytes(uri)
    assert not [n for _, _, names in os.walk(cache) for n in names if n.endswith(".bin")], "nothing fetched at open"
    np.testing.assert_array_equal(tokens[0:5], TokenBytes(local)[0:5])
    fetched = [n for _, _, names in os.walk(cache) for n in names if n.endswith(".bin")]
    assert fetched == [formats.shard_name("train", 0, 4, "bin")]
    np.testing.assert_array_equal(tokens[0 : len(tokens)], TokenBytes(local)[0 : len(tokens)])


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
def test_one_gs_shard_read_on_its_own_is_checked_against_the_meta_json_beside_it(
    gcs_emulator, cache, tmp_path, monkeypatch, kind
) -> None:
    """`open_tokens("gs://.../train-00001-of-00002.bin")` fetched the object unchecked and looked for
    meta.json beside the cached copy, where there is none: a flipped or truncated object read silently,
    and a .bin shard lost its dtype, eos_id and vocabulary."""
    from dew.data.tokens.opening import open_tokens
    from tests.runtime.token_support import EOS, documents, write_corpus

    field = None if kind == "bin" else "ids"
    local = write_corpus(str(tmp_path / kind), {"train": documents(30, seed=2)}, kind=kind, dtype="uint32", field=field)
    uri = f"gs://{BUCKET}/single/{kind}"
    _upload_directory(local, uri)
    name = formats.read_meta(local).shards("train")[1].name
    whole = open_tokens(os.path.join(local, name), field=field)
    read = open_tokens(f"{uri}/{name}", field=field)
    np.testing.assert_array_equal(read[:], whole[:])
    assert (read.eos_id, read.dtype) == (EOS, np.dtype("uint32"))

    with open(os.path.join(local, name), "rb") as f:
        good = f.read()
    flipped = bytearray(good)
    flipped[len(good) // 2] ^= 0x10
    for i, damaged in enumerate((bytes(flipped), good[:-4])):
        _upload(f"{uri}/{name}", damaged)
        monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / f"another-host-{i}"))  # one that never fetched it
        with pytest.raises(ValueError, match="rerun the preprocess job with --overwrite") as error:
            open_tokens(f"{uri}/{name}", field=field)[:]
        assert f"{uri}/{name}" in str(error.value)


def test_a_corpus_in_a_bucket_that_does_not_exist_is_refused_as_such(gcs_emulator, cache) -> None:
    """A mistyped bucket was reported as a corpus never committed, with a rerun of the job as the fix."""
    with pytest.raises(FileNotFoundError, match="bucket gs://no-such-bucket does not exist") as error:
        formats.read_meta("gs://no-such-bucket/corpora/wiki")
    assert "never committed" not in str(error.value)
    with pytest.raises(FileNotFoundError, match="never committed"):  # the bucket is there, the corpus is not
        formats.read_meta(f"gs://{BUCKET}/corpora/nothing-here")


def test_reading_gs_without_credentials_says_how_to_get_them(cache, monkeypatch, tmp_path) -> None:
    """google.auth said only `File /x.json was not found`, with no word of what reads need."""
    import google.auth.exceptions

    monkeypatch.delenv("STORAGE_EMULATOR_HOST", raising=False)
    monkeypatch.setenv("GOOGLE_APPLICATION_CREDENTIALS", str(tmp_path / "missing.json"))
    monkeypatch.setattr(remote, "_SESSION", None)
    with pytest.raises(google.auth.exceptions.DefaultCredentialsError) as error:
        remote.read_bytes(f"gs://{BUCKET}/corpora/wiki/meta.json")
    assert "gcloud auth application-default login" in str(error.value)
    assert "missing.json" in str(error.value)  # what google.auth found wrong is kept


def test_a_shard_gone_from_a_committed_directory_names_the_rerun_that_mends_it(gcs_emulator, cache, tmp_path) -> None:
    """The refusal said "rerun the preprocess job", and a plain rerun of a committed directory does
    nothing ("already committed by this same job"): only --overwrite writes the shard again."""
    from tests.runtime.token_support import documents, write_corpus

    local = write_corpus(str(tmp_path / "gone"), {"train": documents(20, seed=4)})
    uri = f"gs://{BUCKET}/corpora/gone"
    _upload_directory(local, uri)
    meta = formats.read_meta(uri)
    shard = meta.shards("train")[0]
    gcs_filesystem().rm(f"{uri}/{shard.name}")
    with pytest.raises(FileNotFoundError, match="rerun the preprocess job with --overwrite"):
        formats.verify_shard(uri, shard)
    os.remove(os.path.join(local, shard.name))
    with pytest.raises(FileNotFoundError, match="rerun the preprocess job with --overwrite"):
        formats.verify_shard(local, shard)


def test_listing_and_existence_on_the_emulator(gcs_emulator) -> None:
    root = f"gs://{BUCKET}/listing"
    for name in ("a.bin", "sub/b.mp4", "sub/deeper/c.mp4", "subway.txt"):
        _upload(f"{root}/{name}", b"x")
    assert remote.list_names(root) == ["a.bin", "sub", "subway.txt"]
    assert remote.list_names(f"{root}/sub/") == ["b.mp4", "deeper"]
    assert remote.find(f"{root}/sub") == [f"{root}/sub/b.mp4", f"{root}/sub/deeper/c.mp4"]  # not subway.txt
    assert remote.exists(f"{root}/a.bin") and remote.exists(f"{root}/sub") and remote.exists(f"gs://{BUCKET}")
    assert not remote.exists(f"{root}/su") and not remote.exists(f"{root}/none")
    assert not remote.exists("gs://dew-no-such-bucket/x")
    with pytest.raises(FileNotFoundError, match=f"{root}/none"):
        remote.list_names(f"{root}/none")


def test_a_shard_of_an_uncommitted_remote_directory_read_on_its_own_is_refused(gcs_emulator, cache) -> None:
    """A killed tokenize job's gs:// directory: its shard and claim, no meta.json. Named on its own, the
    shard read as a raw .bin, as it did locally."""
    from dew.data import Loading, TokenWindows, committed

    root = f"gs://{BUCKET}/remote-killed"
    _commit_corpus(root, np.arange(100))
    gcs_filesystem().rm(f"{root}/{formats.META}")
    _upload(f"{root}/{committed.JOB_MARKER}", json.dumps({"config": {"job": "tokenize"}}).encode())
    shard = f"{root}/{formats.shard_name('train', 0, 1, 'bin')}"
    with pytest.raises(committed.UncommittedError, match="a dew tokenize job's directory that was never committed"):
        TokenWindows(path=shard, seq_len=8, loading=Loading(workers=0), val_batches=None).load(batch=2)

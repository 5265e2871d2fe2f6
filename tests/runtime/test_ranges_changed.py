"""gs:// shards that change under a committed corpus, and bodies that lie: a shard cut short, extended or
overwritten after its commit (or between two reads of one run), a `.blocks` file missing or of the other
layout, a 206 whose bytes are the right length but not the right bytes. Each is a clear error naming the
shard, or the committed bytes (every one checked); never another version's bytes, never minutes of retries."""

from __future__ import annotations

import os

import numpy as np
import pytest

from dew.data import block_sums, formats
from dew.data.tokens.token_bytes import TokenBytes
from tests.conftest import BUCKET
from tests.gcs_faults import Fault
from tests.runtime.test_ranges import _upload_directory
from tests.runtime.token_support import documents, write_corpus
from tests.support import gcs_filesystem

pytestmark = pytest.mark.gcs
BLOCK = 512
NAME = formats.shard_name("train", 0, 1, "bin")
SHARD = r"%2Ftrain-00000-of-00001\.bin\?alt=media$"


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


def _corpus(tmp_path, name: str, *, blocks_version: int = block_sums.BLOCKS_VERSION) -> tuple[str, str]:
    """A one-shard token corpus of 512-byte blocks, written locally and copied to gs://."""
    docs = documents(120, seed=len(name), longest=400)
    local = write_corpus(
        str(tmp_path / name), {"train": docs}, shards=1, block_bytes=BLOCK, blocks_version=blocks_version
    )
    uri = f"gs://{BUCKET}/{name}"
    _upload_directory(local, uri)
    return local, uri


def _replace(uri: str, name: str, data: bytes) -> None:
    with gcs_filesystem().open(f"{uri}/{name}", "wb") as f:
        f.write(data)


def _shard_bytes(local: str, name: str = NAME) -> bytes:
    with open(os.path.join(local, name), "rb") as f:
        return f.read()


@pytest.mark.parametrize("during", [False, True])
def test_a_shard_cut_short_is_refused_at_once_naming_it_and_both_sizes(
    gcs_faults, cache, tmp_path, monkeypatch, during
) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "60")  # the default is 300: a persistent cut is not retried that long
    local, uri = _corpus(tmp_path, f"changed-cut-{during}")
    data = _shard_bytes(local)
    near, far = TokenBytes(local), TokenBytes(uri)
    if during:  # a first read of this run, then the object is cut: its blocks stay, the rest is refused
        np.testing.assert_array_equal(far[0:300], near[0:300])
    _replace(uri, NAME, data[: len(data) // 2])
    tail = len(near) - 50
    before = gcs_faults.count(SHARD)
    with pytest.raises(formats.DamagedError, match=rf"{NAME}: .*holds {len(data) // 2} bytes.*{len(data)}"):
        far[tail : tail + 10]
    assert gcs_faults.count(SHARD) - before <= 3, "a size that differs from meta.json's is not retried"
    if during:
        np.testing.assert_array_equal(far[0:300], near[0:300])  # the committed blocks it held, checked again


def test_a_shard_extended_after_its_commit_reads_its_committed_bytes(gcs_emulator, cache, tmp_path) -> None:
    local, uri = _corpus(tmp_path, "changed-longer")
    _replace(uri, NAME, _shard_bytes(local) + bytes(4000))
    near, far = TokenBytes(local), TokenBytes(uri)
    np.testing.assert_array_equal(far[0 : len(near)], near[0 : len(near)])


def test_a_shard_overwritten_between_two_reads_never_mixes_its_versions(
    gcs_emulator, cache, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    local, uri = _corpus(tmp_path, "changed-overwritten")
    data = bytearray(_shard_bytes(local))
    near, far = TokenBytes(local), TokenBytes(uri)
    np.testing.assert_array_equal(far[0:200], near[0:200])  # blocks 0 and 1 now in the host's cache
    rewritten = bytearray(data)
    rewritten[2 * BLOCK :] = bytes(b ^ 0x5A for b in data[2 * BLOCK :])  # same size, every later block another's
    _replace(uri, NAME, bytes(rewritten))
    np.testing.assert_array_equal(far[0:200], near[0:200])
    read, refused = 0, 0
    for start in range(0, len(near) - 100, 997):
        try:
            got = far[start : start + 100]
        except formats.DamagedError as error:
            assert NAME in str(error) and "fails its crc32c" in str(error)
            refused += 1
            continue
        np.testing.assert_array_equal(got, near[start : start + 100])
        read += 1
    assert read and refused, "what was cached reads as committed, what was not is refused"


def test_a_206_of_the_right_length_but_wrong_bytes_is_fetched_again_then_refused(
    gcs_faults, cache, tmp_path, monkeypatch
) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    monkeypatch.setenv("DEW_GCS_REQUESTS", "1")
    local, uri = _corpus(tmp_path, "changed-lying")
    near, far = TokenBytes(local), TokenBytes(uri)
    sums = r"%2Ftrain-00000-of-00001\.bin\.blocks\?alt=media$"
    gcs_faults.inject(Fault("corrupt", path=sums, ranged=True), Fault("corrupt", path=SHARD, ranged=True, times=2))
    np.testing.assert_array_equal(far[0:300], near[0:300])
    assert not gcs_faults.pending(), "each lie was met, checked and fetched again"
    gcs_faults.inject(Fault("corrupt", path=SHARD, ranged=True, fraction=0.9, times=100))
    with pytest.raises(formats.DamagedError, match=rf"{NAME}: block \d+ .*fails its crc32c in 3 fetches"):
        far[len(near) - 300 : len(near) - 200]


@pytest.mark.parametrize("version", [1, block_sums.BLOCKS_VERSION])
def test_a_missing_blocks_file_is_refused_naming_it(gcs_emulator, cache, tmp_path, version) -> None:
    _, uri = _corpus(tmp_path, f"changed-no-blocks-{version}", blocks_version=version)
    gcs_filesystem().rm(f"{uri}/{NAME}{formats.BLOCKS_SUFFIX}")
    with pytest.raises(formats.DamagedError, match=rf"{NAME}\.blocks is missing"):
        TokenBytes(uri)[0:10]


@pytest.mark.parametrize("version", [1, block_sums.BLOCKS_VERSION])
def test_a_blocks_file_of_the_other_layout_is_refused_naming_it(
    gcs_emulator, cache, tmp_path, monkeypatch, version
) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "60")
    name = f"changed-layout-{version}"
    local, uri = _corpus(tmp_path, name, blocks_version=version)
    other = write_corpus(
        str(tmp_path / "other"),
        {"train": documents(120, seed=len(name), longest=400)},  # the same ids: only the layout differs
        shards=1,
        block_bytes=BLOCK,
        blocks_version=3 - version,
    )
    assert _shard_bytes(other) == _shard_bytes(local)
    _replace(uri, NAME + formats.BLOCKS_SUFFIX, _shard_bytes(other, NAME + formats.BLOCKS_SUFFIX))
    with pytest.raises(formats.DamagedError, match=rf"{NAME}\.blocks"):
        TokenBytes(uri)[0:10]

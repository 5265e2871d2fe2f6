"""Streams over gs:// shards read by range resume exactly: stopped at a drawn step on one share count,
the position written to JSON and read back, and resumed on another, on the same host's block cache or
on a cold one (another host), they yield the global batches of one uninterrupted local run, and the
resumed tail may read the local copy instead of the bucket, or the bucket instead of the copy."""

from __future__ import annotations

import os
import tempfile
from typing import Any

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import ArrayRecordImages, Loading, PackedTokens, TokenWindows
from tests.conftest import BUCKET
from tests.runtime.image_support import records, write_committed
from tests.runtime.test_ranges import _upload_directory
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, read_global

pytestmark = pytest.mark.gcs

SERIAL = Loading(workers=0, read_buffer=8)
STEPS = 7


@pytest.fixture(scope="module")
def corpora(gcs_emulator, tmp_path_factory) -> dict[str, tuple[str, str]]:
    """Each corpus written locally and copied to gs://, as (local directory, gs:// URI): token shards of
    each kind with 4 KiB checksum blocks, so one window's read spans blocks and shards, and images whose
    records span several blocks."""
    root = tmp_path_factory.mktemp("ranged-resume")
    splits = {"train": documents(50, seed=11), "val": documents(12, seed=12)}
    out = {}
    for kind in ("bin", "parquet", "array_record"):
        field = None if kind == "bin" else "ids"
        local = write_corpus(str(root / kind), splits, kind=kind, shards=3, field=field, block_bytes=4096)
        out[kind] = local, f"gs://{BUCKET}/ranged-resume-{kind}"
    rows = records(24, pad=[bytes([i]) * (5000 + 300 * i) for i in range(24)])
    write_committed(str(root / "images"), {"train": [rows[:9], rows[9:17], rows[17:]]}, checksums=True)
    out["images"] = str(root / "images"), f"gs://{BUCKET}/ranged-resume-images"
    for local, uri in out.values():
        _upload_directory(local, uri)
    return out


def _spec(kind: str, path: str, seed: int) -> Any:
    if kind == "images":
        augment = {"flip": True, "random_crop": True}
        return ArrayRecordImages(path, image_size=16, val_batches=0, seed=seed, loading=SERIAL, **augment)
    if kind == "packed":
        return PackedTokens(path=path, seq_len=9, packing_bins=3, seed=seed, loading=SERIAL)
    return TokenWindows(path=path, seq_len=8, seed=seed, field=None if kind == "bin" else "ids", loading=SERIAL)


def _unnamed(state: dict) -> tuple:
    """A position without the corpus's path, which names where it was read, not what."""
    return state["records"], sorted(state.get("tokens", {}).values())


@given(
    kind=st.sampled_from(["bin", "parquet", "array_record", "packed", "images"]),
    stop_at=st.integers(0, STEPS),
    counts=st.sampled_from([(1, 2), (2, 1), (2, 4), (4, 1), (1, 1), (4, 4)]),
    seed=st.integers(0, 20),
    tail=st.sampled_from(["same host", "cold host", "local copy"]),
    head_local=st.booleans(),
)
@settings(max_examples=14, deadline=None)
def test_a_ranged_stream_resumes_exactly_on_another_share_count_and_cache(
    corpora, kind, stop_at, counts, seed, tail, head_local
) -> None:
    local, uri = corpora["bin" if kind == "packed" else kind]
    with tempfile.TemporaryDirectory() as scratch, pytest.MonkeyPatch.context() as patch:
        patch.setenv("DEW_CACHE_DIR", os.path.join(scratch, "head"))
        near = _spec(kind, local, seed).load(batch=4)
        far = _spec(kind, uri, seed).load(batch=4)
        full, end = read_global(near.train, 1, STEPS)
        head, state = read_global((near if head_local else far).train, counts[0], stop_at)
        if tail == "cold host":
            patch.setenv("DEW_CACHE_DIR", os.path.join(scratch, "tail"))
        # A tail on the bucket after a head on the copy, and on the copy after a head on the bucket.
        then = far if head_local or tail != "local copy" else near
        rest, tail_end = read_global(then.train, counts[1], STEPS - stop_at, state)
    assert_batches_equal(full, head + rest)
    assert _unnamed(tail_end) == _unnamed(end)

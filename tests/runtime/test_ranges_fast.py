"""tests/gcs_fast.py, the benchmarks' fast object server, answers dew's reads as the GCS emulator does;
and dew's client keeps its connections when more requests are in flight than its old pool held."""

from __future__ import annotations

import base64
import os
import shutil
import threading
from collections.abc import Iterator
from typing import Any

import numpy as np
import pytest
import requests

from dew.data import Loading, datasets, formats, ranges, record_shards, remote, shard_cache
from dew.data.images import image_records
from tests.conftest import BUCKET
from tests.gcs_fast import FastGCS
from tests.gcs_faults import FaultProxy
from tests.runtime.test_ranges import _upload_directory
from tests.runtime.token_support import write_corpus

pytestmark = pytest.mark.gcs


@pytest.fixture
def fast(tmp_path) -> Iterator[FastGCS]:
    os.makedirs(tmp_path / "objects" / BUCKET)
    server = FastGCS(str(tmp_path / "objects"), lifetime=120).start()
    try:
        yield server
    finally:
        server.stop()


def _fresh(tmp_path, monkeypatch, endpoint: str, name: str) -> None:
    """Reads from now on go to `endpoint`, from an empty cache of their own (nothing read before is reused)."""
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", endpoint)
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / f"cache-{name}"))
    ranges._SUMS.clear()  # (a version 2 shard's checksums, held by block_sums, stay: another read fetches them)
    record_shards._INDEXES.clear()
    shard_cache._CHECKED.clear()


def _tokens(uri: str) -> list[np.ndarray]:
    data = datasets.TokenWindows(path=uri, seq_len=256, val_batches=None, loading=Loading(workers=0, read_buffer=32))
    with data.load(batch=8).train() as stream:
        return [next(stream) for _ in range(4)]


def _images(uri: str) -> dict[str, Any]:
    records = image_records.committed(formats.read_meta(uri, kind="images"), uri, "train")
    return records.read_batch(np.random.default_rng(2).permutation(len(records))[:12])


def _same(one: Any, other: Any) -> None:
    if isinstance(one, dict):
        assert sorted(one) == sorted(other)
        for key in one:
            _same(one[key], other[key])
    elif isinstance(one, (list, tuple)):
        assert len(one) == len(other)
        for a, b in zip(one, other, strict=True):
            _same(a, b)
    elif isinstance(one, np.ndarray):
        assert one.dtype == other.dtype
        np.testing.assert_array_equal(one, other)
    else:
        assert one == other


def _metadata(endpoint: str, uri: str) -> dict[str, str]:
    bucket, _, name = uri[len("gs://") :].partition("/")
    got = requests.get(f"{endpoint}/storage/v1/b/{bucket}/o/{requests.utils.quote(name, safe='')}", timeout=10)
    got.raise_for_status()
    return {k: got.json()[k] for k in ("name", "bucket", "size", "crc32c", "md5Hash")}


def test_the_fast_server_answers_dew_as_the_emulator_does(gcs_emulator, fast, tmp_path, monkeypatch) -> None:
    from tests.runtime.image_support import records, write_committed

    rng = np.random.default_rng(0)
    docs = [np.append(rng.integers(1, 60000, rng.integers(100, 600)), 0) for _ in range(120)]
    tokens = write_corpus(str(tmp_path / "tokens"), {"train": docs}, shards=4)
    images = str(tmp_path / "images")
    rows = records(24, pad=[rng.bytes(int(rng.integers(2000, 9000))) for _ in range(24)])
    write_committed(images, {"train": [rows[:12], rows[12:]]}, checksums=True)
    for local, name in ((tokens, "fast-tokens"), (images, "fast-images")):
        _upload_directory(local, f"gs://{BUCKET}/{name}")
        shutil.copytree(local, os.path.join(fast.root, BUCKET, name))
    tokens_uri, images_uri = f"gs://{BUCKET}/fast-tokens", f"gs://{BUCKET}/fast-images"

    read = {}
    for where, endpoint in (("emulator", gcs_emulator), ("fast", fast.url)):
        _fresh(tmp_path, monkeypatch, endpoint, where)
        before, answered = ranges.FETCHED.requests, fast.requests
        read[where] = (_tokens(tokens_uri), _images(images_uri))
        assert ranges.FETCHED.requests > before, "the batches were fetched by range, not from a cache"
        assert (fast.requests > answered) == (where == "fast")
        assert sorted(remote.list_names(images_uri)) == sorted(os.listdir(images))
    _fresh(tmp_path, monkeypatch, gcs_emulator, "local")
    local = (_tokens(tokens), _images(images))
    _same(read["fast"], read["emulator"])
    _same(read["fast"][0], local[0])
    named = {k for k, v in local[1].items() if any(images in str(x) for x in np.ravel(v))}  # where each came from
    _same(
        {k: v for k, v in read["fast"][1].items() if k not in named},
        {k: v for k, v in local[1].items() if k not in named},
    )
    for name in sorted(os.listdir(tokens)):
        uri = f"{tokens_uri}/{name}"
        assert _metadata(fast.url, uri) == _metadata(gcs_emulator, uri)
        size = int(_metadata(fast.url, uri)["size"])
        with open(os.path.join(tokens, name), "rb") as f:
            whole = f.read()
        quoted = requests.utils.quote(uri.split("/", 3)[3], safe="")
        answers = []
        for endpoint in (fast.url, gcs_emulator):  # the Range requests dew sends: bytes=lo-hi
            url = f"{endpoint}/download/storage/v1/b/{BUCKET}/o/{quoted}"
            for lo, hi in ((0, 0), (1, 300), (size // 2, size + 10)):
                got = requests.get(url, params={"alt": "media"}, headers={"Range": f"bytes={lo}-{hi}"}, timeout=10)
                answers.append((endpoint, got.status_code, got.content))
                assert got.status_code == 206 and got.content == whole[lo : hi + 1]
        assert fast.url in {a[0] for a in answers}
        past = requests.get(
            f"{fast.url}/download/storage/v1/b/{BUCKET}/o/{quoted}",
            params={"alt": "media"},
            headers={"Range": f"bytes={size}-{size + 5}"},
            timeout=10,
        )
        assert past.status_code == 416  # as GCS answers past the end (the emulator: an empty 206)
    crc = base64.b64decode(_metadata(fast.url, f"{tokens_uri}/{formats.META}")["crc32c"])
    assert len(crc) == 4


def _windows(fast: FastGCS, tmp_path, count: int) -> tuple[str, list[tuple[ranges.RangedShard, int, int]]]:
    """A one-shard corpus on the fast server and `count` ranges of it, no two in adjacent blocks."""
    docs = [np.append(np.arange(300 * count) % 60000 + 1, 0)]
    local = write_corpus(str(tmp_path / "wide"), {"train": docs}, shards=1, block_bytes=256)
    shutil.copytree(local, os.path.join(fast.root, BUCKET, "wide"))
    uri = f"gs://{BUCKET}/wide"
    (shard,) = formats.read_meta(local).shards("train")
    ranged = ranges.RangedShard(f"{uri}/{shard.name}", shard)
    return uri, [(ranged, 512 * i, 512 * i + 100) for i in range(count)]


def test_more_requests_in_flight_than_64_reuse_their_connections(fast, tmp_path, monkeypatch) -> None:
    """DEW_GCS_REQUESTS=96 kept 96 requests in flight through a pool of 64 connections: urllib3 closed
    the 32 it could not pool after every batch and opened them again for the next."""
    monkeypatch.setenv("DEW_GCS_REQUESTS", "96")
    monkeypatch.setattr(ranges, "_POOL", None)
    monkeypatch.setattr(remote, "_SESSION", None)
    _, windows = _windows(fast, tmp_path, 96)
    _fresh(tmp_path, monkeypatch, fast.url, "checksums")
    ranges.read(windows[:1])  # the shard's checksums, fetched by range before the batches, which they serve
    fast.together = threading.Barrier(96)  # every range request of a batch is in flight at once
    _fresh(tmp_path, monkeypatch, fast.url, "first")
    first = ranges.read(windows)
    opened = fast.connections
    _fresh(tmp_path, monkeypatch, fast.url, "second")
    assert ranges.read(windows) == first
    assert [len(b) for b in first] == [100] * 96
    assert fast.connections == opened, "the second batch opened no connection"
    assert not fast.together.broken


def test_a_proxy_in_the_environment_still_carries_the_reads(fast, tmp_path, monkeypatch) -> None:
    """The client reads the proxy variables once a session instead of on every request; they still apply."""
    uri, windows = _windows(fast, tmp_path, 4)
    proxy = FaultProxy(fast.url, lifetime=120).start()
    try:
        for name in ("NO_PROXY", "no_proxy", "HTTP_PROXY"):
            monkeypatch.delenv(name, raising=False)
        monkeypatch.setenv("http_proxy", proxy.url)
        monkeypatch.setattr(remote, "_SESSION", None)
        _fresh(tmp_path, monkeypatch, fast.url, "proxied")
        assert formats.read_meta(uri).shards("train")
        assert [len(b) for b in ranges.read(windows)] == [100] * 4
        assert proxy.count(r"alt=media") >= 5  # meta.json, the block file and the ranges went through it
    finally:
        proxy.stop()
        monkeypatch.setattr(remote, "_SESSION", None)

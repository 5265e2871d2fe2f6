"""Token streams over gs:// shards read by range: the batches of a local copy, a resume that crosses
between the two, per-host reads that scale with the host's share of a batch, not the shard count, and
a close that turns away the requests a deep read-ahead queued."""

from __future__ import annotations

import os
import threading

import numpy as np
import pytest

from dew.data import DataPartition, Loading, block_sums, datasets, ranges, remote
from dew.data.tokens.token_bytes import TokenBytes
from dew.data.tokens.windows import TokenWindowSource
from tests.conftest import BUCKET
from tests.gcs_faults import Fault
from tests.hang_guard import bounded
from tests.runtime.token_support import documents, write_corpus
from tests.support import assert_batches_equal, gcs_filesystem, read_global

pytestmark = pytest.mark.gcs


def _upload_directory(local: str, uri: str) -> None:
    fs = gcs_filesystem()
    for name in sorted(os.listdir(local)):
        with open(os.path.join(local, name), "rb") as source, fs.open(f"{uri}/{name}", "wb") as target:
            target.write(source.read())
    fs.invalidate_cache()


@pytest.fixture
def cache(tmp_path, monkeypatch) -> str:
    monkeypatch.setenv("DEW_CACHE_DIR", str(tmp_path / "cache"))
    return str(tmp_path / "cache")


@pytest.fixture
def corpus(gcs_emulator, tmp_path) -> tuple[str, str]:
    local = write_corpus(
        str(tmp_path / "streams"), {"train": documents(80, seed=7), "val": documents(16)}, shards=4, block_bytes=4096
    )
    uri = f"gs://{BUCKET}/ranged-streams"
    _upload_directory(local, uri)
    return local, uri


@pytest.mark.parametrize("spec", [datasets.TokenWindows, datasets.PackedTokens])
def test_a_gs_stream_is_the_local_ones_and_resumes_across_the_two(corpus, cache, spec) -> None:
    local, uri = corpus
    serial = Loading(workers=0, read_buffer=8)
    here = spec(path=local, seq_len=8, loading=serial).load(batch=4)
    there = spec(path=uri, seq_len=8, loading=serial).load(batch=4)
    assert there.train.remote and not here.train.remote
    assert (
        isinstance(there.train.order.corpora[0].source.tokens._ranged, tuple) if spec is datasets.TokenWindows else True
    )
    full, end = read_global(here.train, 1, 9)
    remote_full, remote_end = read_global(there.train, 2, 9)
    assert_batches_equal(full, remote_full)
    assert _unnamed(remote_end) == _unnamed(end)
    for first, then in ((there, here), (here, there)):
        head, state = read_global(first.train, 2, 4)
        tail, tail_end = read_global(then.train, 4, 5, state)
        assert_batches_equal(full, head + tail)
        assert _unnamed(tail_end) == _unnamed(end)


def _unnamed(state: dict) -> tuple:
    """A position without the corpus's path, which names where it was read, not what."""
    return state["records"], sorted(state["tokens"].values())


def test_per_host_reads_follow_the_hosts_share_of_a_batch_not_the_shard_count(gcs_emulator, cache, tmp_path) -> None:
    """4096 shares of a global batch of 8192 windows: each host reads 2 windows a step. Its range requests
    and bytes are bounded by those 2 windows' blocks, and stay so on a corpus with 4x the shards."""
    shares, batch, seq_len, block = 4096, 8192, 1024, 4096
    window_bytes = (seq_len + 1) * 2
    per_window = -(-window_bytes // block) + 1  # blocks one window can touch
    seen = []
    for shards in (8, 32):
        local = write_corpus(
            str(tmp_path / f"s{shards}"),
            {"train": documents(2000, seed=1, longest=400)},
            shards=shards,
            block_bytes=block,
        )
        uri = f"gs://{BUCKET}/share-math-{shards}"
        _upload_directory(local, uri)
        source = TokenWindowSource(TokenBytes(uri), seq_len)
        rng = np.random.default_rng(shards)
        for _ in range(4):  # four steps of one host: batch // shares windows of the global order each
            mine = rng.choice(len(source), batch // shares, replace=False)
            before = (ranges.FETCHED.requests, ranges.FETCHED.bytes, ranges.FETCHED.index_reads)
            rows = source.read_batch(mine)["text"]
            np.testing.assert_array_equal(rows, TokenWindowSource(TokenBytes(local), seq_len).read_batch(mine)["text"])
            requests, fetched, index_reads = (
                now - then
                for now, then in zip(
                    (ranges.FETCHED.requests, ranges.FETCHED.bytes, ranges.FETCHED.index_reads), before, strict=True
                )
            )
            local_windows = batch // shares
            assert requests <= local_windows * per_window, "range requests grow with the host's windows only"
            assert fetched <= local_windows * per_window * block
            assert index_reads <= 2 * local_windows, "a block index for each shard a window touches, at most"
            seen.append((requests, fetched))
    assert max(r for r, _ in seen) <= 2 * per_window  # the same bound on 8 shards and on 32


def test_a_packed_batch_over_gs_is_one_read_of_every_piece(corpus, cache, monkeypatch) -> None:
    local, uri = corpus
    calls = []
    real = ranges.read
    monkeypatch.setattr(ranges, "read", lambda requests: calls.append(len(requests)) or real(requests))
    source = datasets.PackedTokens(path=uri, seq_len=64).load(batch=4).train.order.corpora[0].source
    here = datasets.PackedTokens(path=local, seq_len=64).load(batch=4).train.order.corpora[0].source
    windows = np.arange(min(8, len(source)))
    calls.clear()
    got = source.read_batch(windows)
    assert len(calls) == 1 and calls[0] >= len(windows), "every piece of the batch in one read"
    assert_batches_equal([here.read_batch(windows)], [got])


def test_closing_a_deep_read_ahead_turns_away_its_queued_requests(gcs_faults, cache, tmp_path, monkeypatch) -> None:
    """64 steps read ahead over slow requests, 2 in flight: dozens of range requests queued when the
    stream is closed after one batch. Close turns them away: none of them reaches the server, only the
    two in flight. Another stream reading ahead in the same pool meanwhile (over another copy of the
    corpus, so the server's log tells the two apart), and one opened afterwards, read the local copy's
    batches."""
    monkeypatch.setenv("DEW_GCS_REQUESTS", "2")
    monkeypatch.setattr(ranges, "_POOL", None)  # a pool of 2 for this test
    # Close aborts the 2 requests in flight; 15 s, not 5, is a margin for a loaded machine late in a full
    # run, where the session's emulator holds every object the suite uploaded.
    # With Closing.close's cancelling made a no-op this test fails: close does not end in 15 s (nor in
    # 90 s, tried), and the queued fetches reach the server after it.
    monkeypatch.setattr(Loading, "stop_seconds", property(lambda self: 15.0))
    local = write_corpus(
        str(tmp_path / "deep"), {"train": documents(2000, seed=3, longest=400)}, shards=4, block_bytes=4096
    )
    uri, other_uri = f"gs://{BUCKET}/deep-read-ahead", f"gs://{BUCKET}/other-read-ahead"
    _upload_directory(local, uri)
    _upload_directory(local, other_uri)
    batch, seq_len = 4, 8

    def train(path: str, read_buffer: int):  # read_buffer // batch steps read ahead (1: none)
        return datasets.TokenWindows(path=path, seq_len=seq_len, loading=Loading(workers=0, read_buffer=read_buffer))

    def asked(name: str) -> int:  # requests for one copy's objects that reached the server
        return gcs_faults.count(name)

    expected, _ = read_global(train(local, 1).load(batch=batch).train, 1, 6)
    block_sums.forget()  # what earlier tests left in this process's checksum cache
    queue = ranges._pool()._work_queue  # the requests queued and not started, every stream's
    with bounded(300):
        # The first steps' blocks and every shard's top level of checksums in this process's cache first,
        # so each stream's first batch needs no request and every request queued is a fetch for a step
        # ahead. (Without the top levels, most of what a deep read-ahead queues are reads waiting for the
        # one fetching a shard's top level, which cost no request: cancelling them shows nothing.)
        warm, _ = read_global(train(uri, 1).load(batch=batch).train, 1, 6)
        read_global(train(other_uri, 1).load(batch=batch).train, 1, 6)
        tops = [key for key, group in block_sums.cache().items if group == block_sums._TOP]
        assert len(tops) == 2 * 4, tops  # both copies' 4 shards
        deep = train(uri, 64 * batch).load(batch=batch).train(DataPartition(index=0, count=1))
        other = train(other_uri, 8 * batch).load(batch=batch).train(DataPartition(index=0, count=1))
        gcs_faults.latency = 1.0
        try:
            first = next(deep)
            others = [next(other)]  # its 8 steps ahead queue their requests in the same pool as deep's
            while queue.qsize() < 12:  # bounded above: the read-ahead queues dozens, 2 leave a second
                threading.Event().wait(0.05)
            queued = queue.qsize()
            before = asked("deep-read-ahead")
        finally:
            deep.close()  # waits out the 2 requests in flight; the queued ones are cancelled
        reached = asked("deep-read-ahead") - before
        # A request taken from the queue just before close may reach the server after the count: 2 in
        # flight, and at most one more a thread taken in the instant between the count and the close.
        assert reached <= 4, f"{reached} of deep's requests reached the server after close ({queued} were queued)"
        gcs_faults.latency = 0.0
        try:
            others += [next(other) for _ in range(5)]  # not turned away by deep's close
        finally:
            other.close()
        assert_batches_equal(expected, others)
        assert_batches_equal(expected[:1], [first])
        assert_batches_equal(expected, warm)
        again, _ = read_global(train(uri, 64 * batch).load(batch=batch).train, 1, 6)
    assert_batches_equal(expected, again)


@pytest.mark.parametrize("server", ["silent", "throttling"])
def test_closing_a_stream_aborts_the_requests_a_server_holds(gcs_faults, cache, tmp_path, monkeypatch, server) -> None:
    """A server that stops answering holds a read-ahead's requests in flight; one that answers 429 with
    Retry-After: 120 holds their retries asleep. Close shuts the sockets down and wakes the sleepers: it
    returns, where it used to raise "a read ... still running 5 s after close", and no request is
    retried after it. A stream opened afterwards reads the local copy's batches on new connections."""
    monkeypatch.setattr(ranges, "_POOL", None)
    local = write_corpus(
        str(tmp_path / "silent"), {"train": documents(2000, seed=5, longest=400)}, shards=4, block_bytes=4096
    )
    uri = f"gs://{BUCKET}/silent-server"
    _upload_directory(local, uri)
    batch = 4

    def train(path: str, read_buffer: int):
        return datasets.TokenWindows(path=path, seq_len=8, loading=Loading(workers=0, read_buffer=read_buffer))

    expected, _ = read_global(train(local, 1).load(batch=batch).train, 1, 6)
    block_sums.forget()
    with bounded(300):
        warm, _ = read_global(train(uri, 1).load(batch=batch).train, 1, 1)  # step 0 needs no request now
        stream = train(uri, 16 * batch).load(batch=batch).train(DataPartition(index=0, count=1))
        if server == "silent":
            gcs_faults.latency = 120.0  # every request from here on waits 2 minutes for an answer
        else:
            gcs_faults.inject(Fault("429", path="silent-server", ranged=True, times=10**6, retry_after="120"))
        try:
            before = gcs_faults.count("silent-server")
            first = next(stream)
            while gcs_faults.count("silent-server") == before:  # the steps ahead's requests are out
                threading.Event().wait(0.05)
            held = gcs_faults.count("silent-server") - before
        finally:
            stream.close()  # raised RuntimeError before: its reads waited on the silent server
        asked = gcs_faults.count("silent-server") - before
        gcs_faults.latency = 0.0
        for fault in gcs_faults.pending():
            fault.times = 0  # the server answers again
        assert asked <= held + remote.requests_in_flight(), "an aborted request was retried"
        again, _ = read_global(train(uri, 16 * batch).load(batch=batch).train, 1, 6)
    assert_batches_equal(expected[:1], warm)
    assert_batches_equal(expected[:1], [first])
    assert_batches_equal(expected, again)

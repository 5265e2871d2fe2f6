"""OnlineImages against a local image server: rows counted once, polite per host, closed with nothing left."""

from __future__ import annotations

import importlib.util
import logging
import re
import threading
import time
from collections.abc import Callable, Iterator

import numpy as np
import psutil
import pytest

from dew.data import DataPartition, Loading, Ramp, datasets, ramped
from dew.data.images import online_pool
from dew.data.images.fetch import FetchPolicy
from dew.data.images.online import BUCKET, WARN_WINDOW, CombinedOnline, OnlineImages
from dew.data.images.online_pool import FETCHED, MAX_THREADS, fit
from dew.data.images.online_rows import share_size, walk

pytest.importorskip("cv2")
pytest.importorskip("datasets")
pytest.importorskip("skimage.data")

from tests.runtime.online_support import KINDS, MAX_BYTES, ImageServer

# busy and slow are the fetch tests' (a 429 stalls its whole host for a second; slow only costs time). The
# reference page drops an image that is not RGB where other image paths convert it, unless convert_to_rgb is set.
STREAM_KINDS = {kind: reason for kind, reason in KINDS.items() if kind not in ("busy", "slow")} | {"grey": "not_rgb"}


@pytest.fixture
def server() -> Iterator[ImageServer]:
    served = ImageServer()
    served.start()
    try:
        yield served
    finally:
        served.stop()


def saved_rows(directory: str, urls: list[str]) -> str:
    import datasets as hf

    hf.Dataset.from_dict({"url": urls, "caption": [f"row {i}" for i in range(len(urls))]}).save_to_disk(directory)
    return directory


def url_of(server: ImageServer, kind: str, i: int) -> str:
    return f"{server.base}/redirect/3/{i}.jpg" if kind == "redirect" else server.url(kind, i)


def settled(check: Callable[[], bool], seconds: float = 60.0) -> bool:
    """Whether `check` holds within `seconds`: a bound on a test that would otherwise hang, not a speed."""
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.05)
    return check()


def spec(source: str, *, workers: int = 0, threads: int = 8, timeout: int = 1, **fields: object) -> OnlineImages:
    loading = Loading(workers=workers, threads=threads, worker_buffer=2)
    policy = FetchPolicy(max_bytes=MAX_BYTES, **fields.pop("policy", {}))  # type: ignore[arg-type]
    return OnlineImages((source,), image_size=64, timeout=timeout, retries=0, loading=loading, fetch=policy, **fields)


def test_every_row_ends_fetched_or_dropped_for_its_one_reason(server: ImageServer, tmp_path) -> None:
    rows = [(url_of(server, kind, i), reason) for kind, reason in STREAM_KINDS.items() for i in range(2)]
    rows += [(server.url("photo", i), None) for i in range(2, 18)]
    data = spec(saved_rows(str(tmp_path / "rows"), [url for url, _ in rows])).load(batch=4)
    assert data.records is None and data.val is None
    with data.train(DataPartition()) as stream:
        batches = [next(stream) for _ in range(3)]

        def each_request_counted_once() -> bool:
            # The reader takes no more batches, so the pool comes to rest; then every request the server
            # saw is a row counted under exactly the reason its kind gives.
            counts = stream.stats().counts
            expected = dict.fromkeys(counts, 0)
            for url, reason in rows:
                expected[reason or FETCHED] += server.requests[url.removeprefix(server.base)]
            return counts == expected

        assert settled(each_request_counted_once), (stream.stats().counts, server.requests)
        stats = stream.stats()
    assert stats.finished >= len(rows) and stats.fetched + stats.dropped == stats.finished
    assert {reason for _, reason in rows if reason} <= {r for r, n in stats.counts.items() if n}
    for batch in batches:
        assert batch["image"].shape == (4, 64, 64, 3) and batch["image"].dtype == np.uint8
        assert len(batch["caption"]) == 4 and all(c.startswith("row ") for c in batch["caption"])


def test_a_worker_process_pool_keeps_the_host_limit_and_leaves_nothing_after_close(
    server: ImageServer, tmp_path
) -> None:
    urls = [server.url("slow", i) for i in range(24)] + [server.url("hang", i) for i in range(4)]
    source = saved_rows(str(tmp_path / "rows"), urls)
    # More slots than hung urls, so the hangs never hold every slot and stall the stream for the timeout.
    data = spec(source, workers=2, threads=8, timeout=30, policy={"per_host": 5}).load(batch=4)
    me = psutil.Process()
    # The spawn context's resource tracker stays for the session, so a warm-up starts it before the baseline;
    # it reads from a server of its own, so none of its requests can land among the measured ones.
    warm_server = ImageServer()
    warm_server.start()
    try:
        warm_rows = saved_rows(str(tmp_path / "warm"), [warm_server.url("photo", i) for i in range(8)])
        with spec(warm_rows, workers=2).load(batch=4).train(DataPartition()) as warm_up:
            next(warm_up)
    finally:
        warm_server.stop()
    children, threads = set(me.children(recursive=True)), set(threading.enumerate())
    stream = data.train(DataPartition())
    [next(stream) for _ in range(3)]
    assert set(me.children(recursive=True)) - children, "a worker process should be fetching"
    assert settled(lambda: sum(server.requests[f"/hang/{i}.jpg"] for i in range(4)) > 0)
    stream.close()  # with fetches hung on the server
    left = sorted(p.pid for p in set(me.children(recursive=True)) - children)
    assert not left, f"processes left after close: {left}"
    threads_left = [t.name for t in set(threading.enumerate()) - threads if "process_request" not in t.name]
    assert not threads_left, f"threads left after close: {threads_left}"
    assert server.most_in_flight <= 5, f"{server.most_in_flight} requests were in flight to one host at once"


def test_the_host_limit_holds_for_the_whole_reader_with_more_processes_than_it(
    server: ImageServer, tmp_path, monkeypatch
) -> None:
    # Three fetch processes whatever the host's cores, and one request in flight to the host for all of them.
    monkeypatch.setattr(online_pool, "fit", lambda loading, rows: (loading.workers, loading.threads))
    urls = [server.url("slow", i) for i in range(24)]
    data = spec(saved_rows(str(tmp_path / "rows"), urls), workers=3, threads=4, timeout=30, policy={"per_host": 1})
    with data.load(batch=2).train(DataPartition()) as stream:
        [next(stream) for _ in range(4)]
    assert server.most_in_flight == 1, f"{server.most_in_flight} requests were in flight to one host at once"


def test_close_in_process_ends_hung_fetches_and_leaves_no_thread(server: ImageServer, tmp_path) -> None:
    urls = [server.url("photo", i) for i in range(8)] + [server.url("hang", i) for i in range(8)]
    data = spec(saved_rows(str(tmp_path / "rows"), urls), threads=6, timeout=60).load(batch=2)
    threads = set(threading.enumerate())
    with data.train(DataPartition()) as stream:
        next(stream)
        assert settled(lambda: sum(server.requests[f"/hang/{i}.jpg"] for i in range(8)) >= 4)
    assert not [t for t in set(threading.enumerate()) - threads if "process_request" not in t.name]


def test_a_collapsing_success_rate_is_logged_and_request_stop_ends_the_stream(
    server: ImageServer, tmp_path, caplog
) -> None:
    urls = [server.url("missing", i) for i in range(50)]
    stream = spec(saved_rows(str(tmp_path / "rows"), urls)).load(batch=2).train(DataPartition())
    ended: list[str] = []
    reader = threading.Thread(target=lambda: ended.append(repr(list(stream))))
    with caplog.at_level(logging.WARNING, logger="dew.data.images.online"):
        reader.start()
        assert settled(lambda: stream.stats().finished >= 2 * WARN_WINDOW)
        stream.request_stop()
        reader.join(timeout=60)
    stream.close()
    assert ended == ["[]"]
    assert stream.stats().success_rate == 0.0 and stream.stats().counts["http_error"] == stream.stats().finished
    assert any("gave an image" in r.getMessage() for r in caplog.records)


def test_captions_are_tokenized_as_the_image_specs_do(server: ImageServer, tmp_path) -> None:
    def tokenize(captions):
        return {"input_ids": np.array([[len(c)] for c in captions], dtype=np.int32)}

    data = spec(saved_rows(str(tmp_path / "rows"), [server.url("photo", i) for i in range(4)])).load(
        batch=2, tokenize=tokenize
    )
    with data.train(DataPartition()) as stream:
        batch = next(stream)
    assert batch["text"]["input_ids"].tolist() == [[len(c)] for c in batch["caption"]]


def test_several_readers_of_a_share_are_refused_and_the_stream_has_no_position(server: ImageServer, tmp_path) -> None:
    data = spec(saved_rows(str(tmp_path / "rows"), [server.url("photo", 0)] * 4)).load(batch=2)
    with pytest.raises(ValueError, match="readers=2 is refused") as refused:
        data.train(DataPartition(readers=2, reader=1))
    # The refusal names the helper that reads on the first reader, where this package has it.
    named = re.search(r"\((dew\.[\w.]+)\.(\w+)\)$", str(refused.value))
    assert named is not None and named.groups() == ("dew.data.distributed", "first_reader_batch")
    assert importlib.util.find_spec(named.group(1)) is not None
    with data.train(DataPartition()) as stream:
        assert not hasattr(stream, "get_state") and not hasattr(stream, "set_state")
    with pytest.raises(TypeError, match="ramped needs a training stream whose position is a global record count"):
        ramped(data, Ramp(start=1, increment=1, samples=4))


def test_each_pass_visits_the_share_once_across_workers_and_shares_cover_the_rows() -> None:
    size, count = 103, 3
    seen = []
    for index in range(count):
        share = share_size(size, index, count)
        passes = [[], []]
        for worker in range(2):
            chunks = walk(size, 7, index, count, worker, 2)
            for epoch in range(2):
                passes[epoch] += next(chunks).tolist()
        assert sorted(passes[0]) == sorted(passes[1]) and len(set(passes[0])) == share
        assert passes[0] != passes[1], "each pass is shuffled afresh"
        seen += passes[0]
    assert sorted(seen) == list(range(size))


def test_the_pool_fits_the_host() -> None:
    assert fit(Loading(workers=16, threads=512), rows=10**6, cores=2) == (1, 64)
    assert fit(Loading(workers=16, threads=512), rows=10**6, cores=129) == (16, MAX_THREADS)
    assert fit(Loading(workers=4, threads=8), rows=3, cores=64) == (3, 8)
    assert fit(Loading(workers=0, threads=512), rows=100, cores=2) == (0, 64)


def test_specs_round_trip_and_combined_online_reads_the_bucket_or_a_copy() -> None:
    spec = OnlineImages(("a", "b"), image_size=128, fetch=FetchPolicy(per_host=4))
    assert datasets.from_config(spec.to_config()) == spec
    assert OnlineImages().loading == Loading(workers=16, threads=512, worker_buffer=20)
    combined = CombinedOnline()
    assert len(combined.sources) == 12 and combined.sources.count(f"{BUCKET}/datasets/leonardo-liked-1.8m") == 5
    assert CombinedOnline.under("/mnt/copy/").sources[0] == "/mnt/copy/datasets/laion-aesthetics-12m+mscoco-2017"
    with pytest.raises(ValueError, match="sources is empty"):
        OnlineImages().load(batch=2)

"""Steady-state reads of gs:// by range through a fast object server, as ratios to local disk.

The PyPI GCS emulator answers a few hundred requests a second here, so bench_gcs_ranges.py's steady
rows measure it. This benchmark serves the same kind of corpora from tests/gcs_fast.py (a threaded
GCS-compatible server over a local directory, 127.0.0.1 only, in a process of its own) that sleeps
LATENCY s before each answer's first byte (in that answer's thread: other requests go on) and paces
every body together at BANDWIDTH bytes/s.
- ceilings: requests/s of 4 KiB Range GETs from one client process (a requests session, N threads)
  against the emulator, the test suite's FaultProxy (in front of the fast server, adding nothing) and
  the fast server: where a measure through each would stop, whatever dew does.
- tokens: TokenWindows (seq_len 2048, batch 32, workers=0), tokens/s over the steady steps (after the
  read-ahead has filled) against the same corpus from local disk in this run, at 0, 20 and 100 ms a
  request, for $DEW_GCS_REQUESTS (requests in flight) 32, 64, 128 and read-ahead AHEAD steps
  (Loading.read_buffer = AHEAD * 32), with the range requests/s that took.
- images: ArrayRecord records (8-24 kB, ImageRecords.read_batch, batch 32, no decoding), records/s
  over an epoch in random order with DEPTH batches read at once (a stand-in for a worker's read
  threads), against the same epoch read from local disk.
Each row starts from an empty cache large enough that nothing is evicted: every window is fetched.
- warm: after the first setting's rows at each latency, the same reads again from the cache they
  filled (DEW_CACHE_BYTES 1 GiB holds both corpora): TokenWindows' same steps (the first pass reads
  on past them by the read-ahead, so the second asks the cache for every block), and a second image
  epoch in another random order. Each gives tokens/s or records/s against local disk, the bytes
  fetched from the server during the measure (range bodies, index and checksum reads; about 0 when
  the cache serves every block) and the client's CPU µs a step (a batch); the same CPU figure for
  local disk is the reference row.
Each row also gives the client's CPU a range request: this process's CPU time (every thread; the
servers run in processes of their own) over the steady steps, divided by the range requests they made.
Run: .venv/bin/python benchmarks/bench_gcs_steady.py   (about seven minutes; --quick: one
DEW_GCS_REQUESTS (32), one read-ahead (4) and one depth (4) at each latency, 1 and 32 clients for the
ceilings, about two minutes)
"""

from __future__ import annotations

import concurrent.futures
import multiprocessing
import os
import random
import shutil
import sys
import tempfile
import threading
import time
from multiprocessing.synchronize import Event
from typing import Any

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_gcs_cache import _free_port, _serve
from bench_gcs_ranges import _announce, _image_corpus, _proxy, _read_when_written, _upload, _wait

from dew.data import Loading, block_sums, datasets, formats, integrity, ranges, record_shards, remote, shard_cache
from dew.data.images import image_records
from tests.runtime.token_support import write_corpus

BASELINE = "the same corpus read from local disk, in the same run"
SHARDS, DOCS, SEQ_LEN, BATCH = 16, 40000, 2048, 32
BANDWIDTH = 200e6  # bytes/s, every answer together
LATENCIES = (0.0, 0.02, 0.1)
IN_FLIGHT = (32, 64, 128)
AHEAD = (4, 16)  # steps read ahead (64 left 2048 requests queued, past the 5 s a close waits for)
DEPTHS = (1, 4)  # image batches read at once
CLIENTS = (1, 8, 32, 128)
IMAGE_SHARDS, IMAGE_RECORDS, IMAGE_BATCH = 24, 96, 32


def _fast(root: str, latency: float, port_file: str, stop: Event) -> None:
    from tests.gcs_fast import FastGCS

    _announce(FastGCS(root, latency=latency, bandwidth=BANDWIDTH).start(), port_file, stop)


def _raw_rate(endpoint: str, name: str, size: int, clients: int, seconds: float = 1.5) -> float:
    """Range GETs of 4 KiB a second from `clients` threads of this process sharing one session."""
    import requests
    import requests.adapters

    session = requests.Session()
    session.mount("http://", requests.adapters.HTTPAdapter(pool_maxsize=max(64, clients)))
    url = f"{endpoint}/download/storage/v1/b/dew-bench/o/{name.replace('/', '%2F')}"
    done, stop = [0], time.monotonic() + seconds

    def client() -> None:
        while time.monotonic() < stop:
            lo = random.randrange(0, size - 4096)
            got = session.get(url, params={"alt": "media"}, headers={"Range": f"bytes={lo}-{lo + 4095}"}, timeout=60)
            assert got.status_code == 206 and len(got.content) == 4096, got.status_code
            done[0] += 1

    threads = [threading.Thread(target=client) for _ in range(clients)]
    start = time.monotonic()
    for thread in threads:
        thread.start()
    for thread in threads:
        thread.join()
    return done[0] / (time.monotonic() - start)


def _setting(scratch: str, endpoint: str | None, in_flight: int) -> None:
    """Reads from now on go to `endpoint` with `in_flight` requests at once, from an empty cache."""
    if endpoint is not None:
        os.environ["STORAGE_EMULATOR_HOST"] = endpoint
    os.environ["DEW_GCS_REQUESTS"] = str(in_flight)
    if ranges._POOL is not None:
        ranges._POOL[1].shutdown(wait=False)
    ranges._POOL, remote._SESSION = None, None
    os.environ["DEW_CACHE_DIR"] = tempfile.mkdtemp(prefix="cache-", dir=scratch)
    os.environ["DEW_CACHE_BYTES"] = str(1 << 30)
    ranges._SUMS.clear()
    block_sums.forget()
    record_shards._INDEXES.clear()
    shard_cache._CHECKED.clear()


def _tokens(path: str, ahead: int) -> tuple[float, float, float]:
    """(tokens/s, range requests/s, client CPU µs a range request) over the steps after the read-ahead filled."""
    loading = Loading(workers=0, read_buffer=ahead * BATCH)
    data = datasets.TokenWindows(path=path, seq_len=SEQ_LEN, val_batches=None, loading=loading)
    steps = max(40, ahead)
    with data.load(batch=BATCH).train() as stream:
        for _ in range(3 + ahead):
            next(stream)
        start, cpu, requests = time.perf_counter(), time.process_time(), ranges.FETCHED.requests
        for _ in range(steps):
            next(stream)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    requests = ranges.FETCHED.requests - requests
    return steps * BATCH * (SEQ_LEN + 1) / seconds, requests / seconds, _per_request(cpu, requests)


def _fetched() -> int:
    """Bytes this process has had from object storage: range bodies, index and checksum group reads."""
    return ranges.FETCHED.bytes + ranges.FETCHED.index_bytes + ranges.FETCHED.sums_bytes


def _tokens_warm(path: str, ahead: int) -> tuple[float, int, float]:
    """(tokens/s, bytes fetched, client CPU µs a step) over _tokens' steady steps read a second time.

    A first stream reads the same steps and `ahead` more (so every step the second one reads ahead is
    whole in the cache, not cut off by the first one's close); the second, of the same seed, reads the
    same windows in the same order, timed over the same steps as _tokens."""
    loading = Loading(workers=0, read_buffer=ahead * BATCH)
    data = datasets.TokenWindows(path=path, seq_len=SEQ_LEN, val_batches=None, loading=loading)
    steps = max(40, ahead)
    with data.load(batch=BATCH).train() as stream:
        for _ in range(3 + ahead + steps + ahead):
            next(stream)
    with data.load(batch=BATCH).train() as stream:
        for _ in range(3 + ahead):
            next(stream)
        start, cpu, fetched = time.perf_counter(), time.process_time(), _fetched()
        for _ in range(steps):
            next(stream)
        seconds, cpu, fetched = time.perf_counter() - start, time.process_time() - cpu, _fetched() - fetched
    return steps * BATCH * (SEQ_LEN + 1) / seconds, fetched, cpu / steps * 1e6


def _per_request(cpu: float, requests: int) -> float:
    return cpu / requests * 1e6 if requests else float("nan")


def _images(path: str, depth: int) -> tuple[float, float, float]:
    """(records/s, range requests/s, client CPU µs a range request) over one epoch in random order,
    `depth` batches read at once, after each shard's first record (its index and open ranges) was read."""
    records = image_records.committed(formats.read_meta(path, kind="images"), path, "train")
    records.read_batch(np.arange(0, len(records), IMAGE_RECORDS))
    batches = np.array_split(np.random.default_rng(3).permutation(len(records)), len(records) // IMAGE_BATCH)
    start, cpu, requests = time.perf_counter(), time.process_time(), ranges.FETCHED.requests
    with concurrent.futures.ThreadPoolExecutor(depth) as pool:
        for _ in pool.map(records.read_batch, batches):
            pass
    seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    requests = ranges.FETCHED.requests - requests
    return len(records) / seconds, requests / seconds, _per_request(cpu, requests)


def _images_warm(path: str, depth: int) -> tuple[float, int, float]:
    """(records/s, bytes fetched, client CPU µs a batch) over a second epoch in another random order,
    `depth` batches at once, after _images read every record once (its indexes kept in this process)."""
    records = image_records.committed(formats.read_meta(path, kind="images"), path, "train")
    batches = np.array_split(np.random.default_rng(4).permutation(len(records)), len(records) // IMAGE_BATCH)
    start, cpu, fetched = time.perf_counter(), time.process_time(), _fetched()
    with concurrent.futures.ThreadPoolExecutor(depth) as pool:
        for _ in pool.map(records.read_batch, batches):
            pass
    seconds, cpu, fetched = time.perf_counter() - start, time.process_time() - cpu, _fetched() - fetched
    return len(records) / seconds, fetched, cpu / len(batches) * 1e6


def _start(spawn: Any, target: Any, args: tuple, port_file: str, stop: Event, children: list) -> str:
    """Starts target(*args, port_file, stop) in a process of its own: the URL it wrote to port_file."""
    child = spawn.Process(target=target, args=(*args, port_file, stop), daemon=True)
    child.start()
    children.append(child)
    return _read_when_written(port_file)


def main() -> None:
    global IN_FLIGHT, AHEAD, DEPTHS, CLIENTS
    if "--quick" in sys.argv[1:]:
        IN_FLIGHT, AHEAD, DEPTHS, CLIENTS = (32,), (4,), (4,), (1, 32)
    print(f"baseline: {BASELINE}")
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    children: list = []
    tokens_rows, image_rows, ceilings, warm_tokens, warm_images = [], [], [], [], []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            rng = np.random.default_rng(0)
            # Each closed by the eos (0), as the tokenize job writes them.
            docs = [np.append(rng.integers(1, 60000, rng.integers(200, 1000)), 0) for _ in range(DOCS)]
            block = integrity.TOKEN_BLOCK_BYTES
            local = write_corpus(os.path.join(scratch, "corpus"), {"train": docs}, shards=SHARDS, block_bytes=block)
            images = _image_corpus(scratch, IMAGE_SHARDS, IMAGE_RECORDS)
            root = os.path.join(scratch, "objects")
            shutil.copytree(local, os.path.join(root, "dew-bench", "tokens"))
            shutil.copytree(images, os.path.join(root, "dew-bench", "images"))
            corpus = sum(s.bytes for s in formats.read_meta(local).shards("train"))
            first = formats.read_meta(local).shards("train")[0]
            _setting(scratch, None, 32)
            local_tokens = _tokens(local, AHEAD[0])[0]
            local_images = _images(images, 1)[0]
            warm_tokens.append(("local disk", "", AHEAD[0], *_tokens_warm(local, AHEAD[0])))
            warm_images.append(("local disk", "", 1, *_images_warm(images, 1)))

            # Ceilings: the emulator, the proxy and the fast server, 0 ms, one client process.
            port = _free_port()
            emulator = spawn.Process(target=_serve, args=(port, stop), daemon=True)
            emulator.start()
            children.append(emulator)
            _wait(port)
            emulator_url = f"http://127.0.0.1:{port}"
            os.environ["STORAGE_EMULATOR_HOST"] = emulator_url
            _upload(local, "gs://dew-bench/tokens")
            servers = {0.0: _start(spawn, _fast, (root, 0.0), os.path.join(scratch, "fast-0"), stop, children)}
            proxy_file = os.path.join(scratch, "proxy")  # the proxy adding no latency: its own ceiling
            proxy = spawn.Process(target=_proxy, args=(servers[0.0], proxy_file, 0.0, stop), daemon=True)
            proxy.start()
            children.append(proxy)
            proxy_url = _read_when_written(proxy_file)
            name = f"tokens/{first.name}"
            against = (("emulator", emulator_url), ("FaultProxy", proxy_url), ("fast server", servers[0.0]))
            for label, endpoint in against:
                rates = [_raw_rate(endpoint, name, first.bytes, n) for n in CLIENTS]
                ceilings.append(f"| {label} | " + " | ".join(f"{r:.0f}" for r in rates) + " |")

            for latency in LATENCIES:
                if latency not in servers:
                    port_file = os.path.join(scratch, f"fast-{latency}")
                    servers[latency] = _start(spawn, _fast, (root, latency), port_file, stop, children)
                for in_flight in IN_FLIGHT:
                    for ahead in AHEAD:
                        _setting(scratch, servers[latency], in_flight)
                        tokens_rows.append((latency, in_flight, ahead, *_tokens("gs://dew-bench/tokens", ahead)))
                        if in_flight == IN_FLIGHT[0]:  # the same steps again, from the cache just filled
                            warm = _tokens_warm("gs://dew-bench/tokens", ahead)
                            warm_tokens.append((f"{latency * 1000:.0f} ms", in_flight, ahead, *warm))
                    for depth in DEPTHS:
                        _setting(scratch, servers[latency], in_flight)
                        image_rows.append((latency, in_flight, depth, *_images("gs://dew-bench/images", depth)))
                        if in_flight == IN_FLIGHT[0]:  # a second epoch, from the cache the first filled
                            warm = _images_warm("gs://dew-bench/images", depth)
                            warm_images.append((f"{latency * 1000:.0f} ms", in_flight, depth, *warm))
    finally:
        stop.set()
        for child in children:
            child.join(timeout=30)
    print(f"tokens: {SHARDS} .bin shards, {corpus / 1e6:.0f} MB, windows of {SEQ_LEN + 1} ids, batch {BATCH}")
    print(f"images: {IMAGE_SHARDS} ArrayRecord shards of {IMAGE_RECORDS} records (8-24 kB), batch {IMAGE_BATCH}")
    print(
        f"link: {BANDWIDTH / 1e6:.0f} MB/s together; local: {local_tokens / 1e6:.1f} M tokens/s, "
        f"{local_images:.0f} records/s"
    )
    print("\nceilings, 4 KiB range GETs/s from one client process, by client threads:")
    print("| server | " + " | ".join(f"{n} clients" for n in CLIENTS) + " |")
    print("| --- |" + " --- |" * len(CLIENTS))
    print("\n".join(ceilings))
    print("\ntokens (TokenWindows):")
    print("| latency | DEW_GCS_REQUESTS | steps ahead | M tokens/s | / local | range requests/s | CPU µs/request |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for latency, in_flight, ahead, rate, requests, cpu in tokens_rows:
        print(
            f"| {latency * 1000:.0f} ms | {in_flight} | {ahead} | {rate / 1e6:.2f} | "
            f"{rate / local_tokens:.3f}x | {requests:.0f} | {cpu:.0f} |"
        )
    print("\nimages (ImageRecords.read_batch):")
    print("| latency | DEW_GCS_REQUESTS | batches at once | records/s | / local | range requests/s | CPU µs/request |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for latency, in_flight, depth, rate, requests, cpu in image_rows:
        print(
            f"| {latency * 1000:.0f} ms | {in_flight} | {depth} | {rate:.0f} | {rate / local_images:.3f}x | "
            f"{requests:.0f} | {cpu:.0f} |"
        )
    print("\nwarm cache, the same reads a second time (DEW_CACHE_BYTES 1 GiB holds both corpora):")
    print("| read | latency | DEW_GCS_REQUESTS | ahead / at once | rate | / local | bytes fetched | CPU µs/step |")
    print("| --- | --- | --- | --- | --- | --- | --- | --- |")
    for kind, rows, local in (("tokens", warm_tokens, local_tokens), ("images", warm_images, local_images)):
        for where, in_flight, ahead, rate, fetched, cpu in rows:
            shown = f"{rate / 1e6:.2f} M tokens/s" if kind == "tokens" else f"{rate:.0f} records/s"
            ratio = f"{rate / local:.3f}x"
            print(f"| {kind} | {where} | {in_flight} | {ahead} | {shown} | {ratio} | {fetched:,} | {cpu:.0f} |")


if __name__ == "__main__":
    main()

"""gs:// shards through the local cache: cold (downloaded) and warm (cached) reads against local reads.

Each read takes every byte of every shard into memory. Cold: an empty cache, so each shard is fetched
from the GCS emulator (a separate process on 127.0.0.1), checked against its crc32c and sha256, and
renamed into place. Warm, new process: the cache holds them and this process checks each one's crc32c
once, as a fresh Grain worker would. Warm, checked: the same process opening them again.
The emulator is no network: cold ratios show the cost of the cache's work and the emulator, not of GCS.
Run: .venv/bin/python benchmarks/bench_gcs_cache.py
"""

from __future__ import annotations

import hashlib
import multiprocessing
import os
import socket
import sys
import tempfile
import time
from collections.abc import Callable
from multiprocessing.synchronize import Event

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dew.data import shard_cache
from tests.support import gcs_filesystem

BASELINE = "reading the same shard files from local disk (page cache warm), whole, one after another"
SHARDS = 4
SHARD_BYTES = 16 << 20
REPEATS = 3


def _serve(port: int, stop: Event) -> None:
    from gcp_storage_emulator.server import create_server

    server = create_server("127.0.0.1", port, in_memory=True, default_bucket="dew-bench")
    server.start()
    stop.wait(timeout=600)  # the emulator goes when the benchmark ends, or at the latest after 10 minutes
    server.stop()


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def _read_all(paths: list[str]) -> int:
    total = 0
    for path in paths:
        with open(path, "rb") as f:
            total += len(f.read())
    return total


def _best(fn: Callable[[], object], before: Callable[[], object] = lambda: None) -> float:
    times = []
    for _ in range(REPEATS):
        before()
        start = time.perf_counter()
        fn()
        times.append(time.perf_counter() - start)
    return min(times)


def main() -> None:
    print(f"baseline: {BASELINE}")
    port = _free_port()
    stop = multiprocessing.get_context("spawn").Event()
    server = multiprocessing.get_context("spawn").Process(target=_serve, args=(port, stop), daemon=True)
    server.start()
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    deadline = time.monotonic() + 30
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                raise RuntimeError("the GCS emulator did not start within 30 s") from None
            time.sleep(0.1)
    try:
        with tempfile.TemporaryDirectory() as scratch:
            rng = np.random.default_rng(0)
            shards, locals_ = [], []
            fs = gcs_filesystem()
            for i in range(SHARDS):
                data = rng.integers(0, 256, SHARD_BYTES, dtype=np.uint8).tobytes()
                path = os.path.join(scratch, f"shard-{i}.bin")
                with open(path, "wb") as f:
                    f.write(data)
                uri = f"gs://dew-bench/corpus/shard-{i}.bin"
                with fs.open(uri, "wb") as f:
                    f.write(data)
                locals_.append(path)
                shards.append((uri, len(data), hashlib.sha256(data).hexdigest()))
            cache = os.path.join(scratch, "cache")
            os.environ["DEW_CACHE_DIR"] = cache

            def through_cache() -> None:
                _read_all([shard_cache.fetch(uri, size=size, sha256=sha) for uri, size, sha in shards])

            def empty_cache() -> None:
                for directory, _, names in os.walk(cache):
                    for name in names:
                        os.remove(os.path.join(directory, name))
                shard_cache._CHECKED.clear()

            megabytes = SHARDS * SHARD_BYTES / 1e6
            local = _best(lambda: _read_all(locals_))
            cold = _best(through_cache, before=empty_cache)
            fresh = _best(through_cache, before=shard_cache._CHECKED.clear)
            checked = _best(through_cache)
    finally:
        stop.set()
        server.join(timeout=30)
    print(f"{SHARDS} shards x {SHARD_BYTES >> 20} MiB, best of {REPEATS}")
    for label, seconds in (
        ("local files (baseline)", local),
        ("cold cache (download + verify)", cold),
        ("warm cache, new process (crc32c pass)", fresh),
        ("warm cache, already checked", checked),
    ):
        print(f"{label:<40} {megabytes / seconds:8.1f} MB/s  {seconds / local:6.2f}x the baseline's time")


if __name__ == "__main__":
    main()

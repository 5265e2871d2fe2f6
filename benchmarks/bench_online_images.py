"""OnlineImages batches/s against a plain thread-pool fetch loop, both on one local server and the same photographs.

Baseline: concurrent.futures.ThreadPoolExecutor(THREADS) mapping urllib.request.urlopen + pixels.decode +
pixels.square over the same urls, stacked into batches of BATCH — the loop a user would write by hand.
Prints batches/s for each and the ratio. Run: .venv/bin/python benchmarks/bench_online_images.py
"""

from __future__ import annotations

import os
import sys
import tempfile
import time
import urllib.request
from concurrent.futures import ThreadPoolExecutor

import numpy as np

# Run as a script from anywhere: the repository root holds the test helpers this builds its data with.
sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

SIZE, BATCH, THREADS, BATCHES, URLS = 256, 32, 16, 12, 512
BASELINE = f"ThreadPoolExecutor({THREADS}) of urlopen + pixels.decode + pixels.square, stacked into batches"


def plain(urls: list[str]) -> int:
    from dew.data.images import pixels

    def one(url: str) -> np.ndarray:
        with urllib.request.urlopen(url, timeout=15) as response:
            return pixels.square(pixels.decode(response.read(), size=SIZE), SIZE)

    with ThreadPoolExecutor(THREADS) as pool:
        for start in range(0, BATCHES * BATCH, BATCH):
            np.stack(list(pool.map(one, urls[start : start + BATCH])))
    return BATCHES


def online(stream) -> int:
    for _ in range(BATCHES):
        next(stream)
    return BATCHES


def main() -> None:
    import datasets

    from dew.data import DataPartition, Loading
    from dew.data.images.online import OnlineImages
    from tests.runtime.online_support import ImageServer

    print("baseline:", BASELINE)
    server = ImageServer()
    server.start()
    try:
        urls = [server.url("photo", i) for i in range(URLS)]
        directory = tempfile.mkdtemp()
        datasets.Dataset.from_dict({"url": urls, "caption": ["a photo"] * URLS}).save_to_disk(directory)
        start = time.perf_counter()
        plain(urls)
        baseline = BATCHES / (time.perf_counter() - start)
        print(f"{'plain thread pool':<44} {baseline:8.2f} batches/s")
        rates = {}
        for workers in (0, 1):
            spec = OnlineImages((directory,), image_size=SIZE, loading=Loading(workers=workers, threads=THREADS))
            with spec.load(batch=BATCH).train(DataPartition()) as stream:
                next(stream)  # the pool's start (a spawned process imports its stack) is not the rate
                start = time.perf_counter()
                online(stream)
                rates[workers] = BATCHES / (time.perf_counter() - start)
            print(f"{f'OnlineImages workers={workers} threads={THREADS}':<44} {rates[workers]:8.2f} batches/s")
        for workers, rate in rates.items():
            print(f"ratio OnlineImages workers={workers} / plain: {rate / baseline:.2f}x")
    finally:
        server.stop()


if __name__ == "__main__":
    main()

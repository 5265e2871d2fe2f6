"""The decoded image stream from gs:// by range, as a ratio to the same corpus on local disk.

bench_gcs_steady.py measures reading alone (ImageRecords.read_batch, no decoding), where local disk is
a memory copy and one process's requests a second are the limit. A trainer reads decoded batches: this
benchmark times `datasets.ArrayRecordImages(...).load(batch=32).train()` (decode, resize to 224, crop;
Loading(workers=0): the training process decodes while Grain's read threads fetch ahead) over the
steady steps, from a committed corpus of real photographs at web sizes (skimage.data's, 320-640 px,
JPEG q90, 20-60 kB, about what CC3M or LAION rows hold), read from local disk and from gs:// through
tests/gcs_fast.py (the threaded GCS-compatible server, in a process of its own) at 20 ms and 100 ms a
request, each from an empty cache. Local and gs:// runs alternate, ROUNDS times, and each ratio is
taken against the local run just before it, so a change in the machine's load falls on both.

Run: .venv/bin/python benchmarks/bench_gcs_stream.py   (about two minutes)
"""

from __future__ import annotations

import io
import multiprocessing
import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))
sys.path.insert(0, os.path.dirname(__file__))

from bench_gcs_steady import _fast, _setting, _start

from dew.data import Loading, datasets

BASELINE = "the same stream from the same corpus on local disk, the run just before, same process"
SHARDS, PER_SHARD, BATCH, SIZE, WARM, STEPS, ROUNDS = 16, 64, 32, 224, 4, 24, 2
LATENCIES = (0.02, 0.1)


def _photos(count: int) -> list[bytes]:
    """`count` JPEGs cut from skimage.data's photographs at 320-640 px a side, q90."""
    from PIL import Image
    from skimage import data as skdata

    sources = [skdata.astronaut(), skdata.coffee(), skdata.chelsea(), skdata.rocket()]
    rng = np.random.default_rng(0)
    out = []
    for i in range(count):
        image = Image.fromarray(sources[i % len(sources)])
        side = int(rng.integers(320, 641))
        resized = image.resize((side, int(side * image.height / image.width)))
        buffer = io.BytesIO()
        resized.save(buffer, format="JPEG", quality=90)
        out.append(buffer.getvalue())
    return out


def _corpus(scratch: str) -> str:
    from tests.runtime.image_support import write_committed

    photos = _photos(SHARDS * PER_SHARD)
    rows = [{"image": photo, "caption": f"photo {i}".encode()} for i, photo in enumerate(photos)]
    local = os.path.join(scratch, "images")
    write_committed(
        local, {"train": [rows[i * PER_SHARD : (i + 1) * PER_SHARD] for i in range(SHARDS)]}, checksums=True
    )
    return local


def _stream(path: str) -> tuple[float, float]:
    """(decoded images/s, this process's CPU µs an image, every thread) over STEPS steps after WARM steps
    (the read-ahead filled)."""
    spec = datasets.ArrayRecordImages(path=path, image_size=SIZE, loading=Loading(workers=0))
    with spec.load(batch=BATCH).train() as stream:
        for _ in range(WARM):
            next(stream)
        start, cpu = time.perf_counter(), time.process_time()
        for _ in range(STEPS):
            batch = next(stream)
        seconds, cpu = time.perf_counter() - start, time.process_time() - cpu
    assert batch["image"].shape[:2] == (BATCH, SIZE), batch["image"].shape
    return STEPS * BATCH / seconds, cpu / (STEPS * BATCH) * 1e6


def main() -> None:
    print(f"baseline: {BASELINE}")
    spawn = multiprocessing.get_context("spawn")
    stop = spawn.Event()
    children: list = []
    rows = []
    try:
        with tempfile.TemporaryDirectory() as scratch:
            local = _corpus(scratch)
            corpus = sum(os.path.getsize(os.path.join(local, name)) for name in os.listdir(local))
            root = os.path.join(scratch, "objects")
            shutil.copytree(local, os.path.join(root, "dew-bench", "images"))
            servers = {
                latency: _start(spawn, _fast, (root, latency), os.path.join(scratch, f"fast-{latency}"), stop, children)
                for latency in LATENCIES
            }
            for _ in range(ROUNDS):
                for latency in LATENCIES:
                    _setting(scratch, None, 32)
                    here = _stream(local)
                    _setting(scratch, servers[latency], 32)
                    there = _stream("gs://dew-bench/images")
                    rows.append((latency, *here, *there))
    finally:
        stop.set()
        for child in children:
            child.join(timeout=30)
    print(f"corpus: {SHARDS} ArrayRecord shards, {SHARDS * PER_SHARD} JPEG photographs, {corpus / 1e6:.1f} MB")
    print(f"stream: ArrayRecordImages image_size {SIZE}, batch {BATCH}, Loading(workers=0), {STEPS} steps after {WARM}")
    print("(CPU: the reading process's, every thread, an image; the server runs in a process of its own)")
    print("| latency a request | local images/s | gs:// images/s | gs:// / local | local CPU µs | gs:// CPU µs |")
    print("| --- | --- | --- | --- | --- | --- |")
    for latency, here, here_cpu, there, there_cpu in rows:
        print(
            f"| {latency * 1000:.0f} ms | {here:.0f} | {there:.0f} | {there / here:.2f}x | {here_cpu:.0f} | "
            f"{there_cpu:.0f} |"
        )
    for latency in LATENCIES:
        mine = [row for row in rows if row[0] == latency]
        ratio = float(np.median([there / here for _, here, _, there, _ in mine]))
        cpu = float(np.median([here_cpu / there_cpu for _, _, here_cpu, _, there_cpu in mine]))
        print(
            f"{latency * 1000:.0f} ms: gs:// / local, median of {len(mine)}: {ratio:.2f}x; local CPU / gs:// CPU "
            f"an image: {cpu:.2f}x (the ratio a host whose cores the reads do not share would reach)"
        )


if __name__ == "__main__":
    main()

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

Cores: on this machine the server is a process beside the reader, and its work for every request
takes cores the reader would decode on, which a TPU host reading from Cloud Storage never pays. So each
round runs twice: "shared" (the reader and the server on every core) and "split" (the server on the
last core, the reader and its local baseline on the others, by sched_setaffinity), the split rows
being the nearer picture of a host whose storage service runs elsewhere.

Run: .venv/bin/python benchmarks/bench_gcs_stream.py   (about two minutes)
"""

from __future__ import annotations

import contextlib
import io
import multiprocessing
import os
import shutil
import sys
import tempfile
import time
from collections.abc import Callable

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


def _arrangements(servers: list[int]) -> list[tuple[str, Callable[[], None]]]:
    """("shared", place) and, with two cores or more, ("split", place): place() sets where this process
    (the reader) and the server processes run."""
    every = sorted(os.sched_getaffinity(0)) if hasattr(os, "sched_getaffinity") else []

    def pin(pid: int, cores: list[int]) -> None:  # every thread of it: affinity is a thread's own
        for task in os.listdir(f"/proc/{pid}/task"):
            with contextlib.suppress(ProcessLookupError):  # a thread that ended meanwhile
                os.sched_setaffinity(int(task), cores)  # threads it starts later inherit their starter's

    def place(reader: list[int], server: list[int]) -> Callable[[], None]:
        def apply() -> None:
            for pid in servers:
                pin(pid, server)
            pin(os.getpid(), reader)

        return apply

    if len(every) < 2 or not os.path.isdir("/proc/self/task"):
        return [("shared", lambda: None)]
    return [("shared", place(every, every)), ("split", place(every[:-1], every[-1:]))]


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
            arrangements = _arrangements([child.pid for child in children])
            for _ in range(ROUNDS):
                for cores, place in arrangements:
                    place()
                    for latency in LATENCIES:
                        _setting(scratch, None, 32)
                        here = _stream(local)
                        _setting(scratch, servers[latency], 32)
                        there = _stream("gs://dew-bench/images")
                        rows.append((cores, latency, *here, *there))
            arrangements[0][1]()  # every core again
    finally:
        stop.set()
        for child in children:
            child.join(timeout=30)
    print(f"corpus: {SHARDS} ArrayRecord shards, {SHARDS * PER_SHARD} JPEG photographs, {corpus / 1e6:.1f} MB")
    print(f"stream: ArrayRecordImages image_size {SIZE}, batch {BATCH}, Loading(workers=0), {STEPS} steps after {WARM}")
    print("(CPU: the reading process's, every thread, an image; the server runs in a process of its own)")
    print("| cores | latency | local images/s | gs:// images/s | gs:// / local | local CPU µs | gs:// CPU µs |")
    print("| --- | --- | --- | --- | --- | --- | --- |")
    for cores, latency, here, here_cpu, there, there_cpu in rows:
        print(
            f"| {cores} | {latency * 1000:.0f} ms | {here:.0f} | {there:.0f} | {there / here:.2f}x | {here_cpu:.0f} | "
            f"{there_cpu:.0f} |"
        )
    for cores in dict.fromkeys(row[0] for row in rows):
        for latency in LATENCIES:
            mine = [row[2:] for row in rows if row[:2] == (cores, latency)]
            ratio = float(np.median([there / here for here, _, there, _ in mine]))
            cpu = float(np.median([here_cpu / there_cpu for _, here_cpu, _, there_cpu in mine]))
            print(
                f"{cores}, {latency * 1000:.0f} ms: gs:// / local, median of {len(mine)}: {ratio:.2f}x; "
                f"local CPU / gs:// CPU an image: {cpu:.2f}x"
            )


if __name__ == "__main__":
    main()

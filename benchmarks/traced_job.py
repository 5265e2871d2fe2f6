"""Runs a dew-preprocess job with tracemalloc in each forked worker (not a benchmark itself).

    python benchmarks/traced_job.py DIR clean --input ... --output ...

The launcher is the dew-preprocess program as usual (it forks its workers), but each worker, before it
becomes Beam's SDK harness, starts tracemalloc and a thread that, whenever the traced memory passes its
last dump by a tenth, writes the top allocation sites (by line, and the largest by traceback) to
DIR/worker-<pid>-peak.txt: the file left holds the sites at the worker's highest traced memory, near
its peak. At exit it writes DIR/worker-<pid>-exit.txt beside it, so the exit's sites (the heap left
once the bundles are done) never overwrite the peak's. bench_clean_memory.py --trace runs the job
through here to find what grows with the corpus.
"""

from __future__ import annotations

import os
import sys
import threading
import time
import tracemalloc
from collections.abc import Callable
from typing import Any


def _dump(directory: str, label: str, when: str) -> None:
    snapshot = tracemalloc.take_snapshot().filter_traces(
        (tracemalloc.Filter(False, tracemalloc.__file__), tracemalloc.Filter(False, "<frozen importlib._bootstrap>"))
    )
    current, peak = tracemalloc.get_traced_memory()
    lines = [f"{label}: traced {current / 2**20:,.1f} MiB now, {peak / 2**20:,.1f} MiB peak"]
    lines += [str(stat) for stat in snapshot.statistics("lineno")[:30]]
    for stat in snapshot.statistics("traceback")[:6]:
        lines.append(f"\n{stat.size / 2**20:,.1f} MiB in {stat.count:,} blocks from:")
        lines += stat.traceback.format(limit=12)
    path = os.path.join(directory, f"worker-{os.getpid()}-{when}.txt")
    with open(path + ".part", "w") as f:
        f.write("\n".join(lines) + "\n")
    os.replace(path + ".part", path)


def _watch(directory: str) -> None:
    dumped = 32 << 20
    while True:
        time.sleep(1.0)
        current, _ = tracemalloc.get_traced_memory()
        if current > dumped * 1.1:
            dumped = current
            _dump(directory, f"at {time.strftime('%H:%M:%S')}", "peak")


def traced(directory: str, main: Callable[[list[str]], Any]) -> Callable[[list[str]], Any]:
    """sdk_worker_main.main, under tracemalloc (DEW_TRACE_FRAMES frames a site, 1 unless set: 12 made
    a clean worker 10x slower)."""

    def run(argv: list[str]) -> Any:
        tracemalloc.start(int(os.environ.get("DEW_TRACE_FRAMES", "1")))
        threading.Thread(target=_watch, args=(directory,), daemon=True).start()
        try:
            return main(argv)
        finally:
            _dump(directory, "at exit", "exit")

    return run


def run() -> int:
    directory, argv = sys.argv[1], sys.argv[2:]
    os.makedirs(directory, exist_ok=True)
    from apache_beam.runners.worker import sdk_worker_main

    from dew.pipelines import cli

    sdk_worker_main.main = traced(directory, sdk_worker_main.main)
    sys.argv = ["dew-preprocess", *argv]
    return cli.main()


if __name__ == "__main__":
    sys.exit(run())

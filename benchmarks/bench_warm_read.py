"""ranges.read from a warm block cache: client CPU µs a step, in one thread, nothing fetched.

A token corpus (16 .bin shards, 256-byte blocks) is served by tests/gcs_fast.py in this process; 20
steps of 32 windows of 2,049 ids at random offsets are read once (filling the cache), then PASSES times
again from the cache, each pass checked byte for byte against the first and timed by this process's
CPU time. Every warm read asks the ledger for its pages, reads its blocks from the mirrors and checks
each one's crc32c; it makes no request (asserted). A measure of the read path alone, without a
stream's read-ahead threads, so the differences of a change show above a shared machine's noise.
Run: .venv/bin/python benchmarks/bench_warm_read.py [PASSES]   (about ten seconds)
"""

from __future__ import annotations

import os
import shutil
import sys
import tempfile
import time

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from dew.data import formats, integrity, ranges
from tests.gcs_fast import FastGCS
from tests.runtime.token_support import write_corpus

SHARDS, DOCS, STEPS, BATCH, WINDOW = 16, 8000, 20, 32, 2049


def main() -> None:
    passes = int(sys.argv[1]) if len(sys.argv) > 1 else 7
    scratch = tempfile.mkdtemp(prefix="bench-warm-")
    server = None
    try:
        rng = np.random.default_rng(0)
        docs = [np.append(rng.integers(1, 60000, rng.integers(200, 1000)), 0) for _ in range(DOCS)]
        local = os.path.join(scratch, "corpus")
        write_corpus(local, {"train": docs}, shards=SHARDS, block_bytes=integrity.TOKEN_BLOCK_BYTES)
        os.makedirs(os.path.join(scratch, "objects", "bench"))
        shutil.copytree(local, os.path.join(scratch, "objects", "bench", "tokens"))
        server = FastGCS(os.path.join(scratch, "objects"), lifetime=600).start()
        os.environ["STORAGE_EMULATOR_HOST"] = server.url
        os.environ["DEW_CACHE_DIR"] = os.path.join(scratch, "cache")
        os.environ["DEW_CACHE_BYTES"] = str(1 << 30)
        shards = [
            ranges.RangedShard(f"gs://bench/tokens/{s.name}", s) for s in formats.read_meta(local).shards("train")
        ]
        steps = []
        for _ in range(STEPS):
            step = []
            for _ in range(BATCH):
                shard = shards[int(rng.integers(len(shards)))]
                lo = int(rng.integers(0, shard.shard.bytes // 2 - WINDOW)) * 2
                step.append((shard, lo, lo + 2 * WINDOW))
            steps.append(step)
        want = [ranges.read(step) for step in steps]  # cold: fetched, and the cache filled
        requests = ranges.FETCHED.requests
        seen = []
        for _ in range(passes):
            cpu = time.process_time()
            for step, expected in zip(steps, want, strict=True):
                assert ranges.read(step) == expected, "a warm read differs from the cold one"
            seen.append((time.process_time() - cpu) / STEPS * 1e6)
        assert ranges.FETCHED.requests == requests, "a warm read made a request"
    finally:
        if server is not None:
            server.stop()
        shutil.rmtree(scratch, ignore_errors=True)
    print(f"{SHARDS} .bin shards, 256-byte blocks; a step: {BATCH} windows of {WINDOW} ids, {STEPS} steps a pass")
    print("CPU µs a step, each pass:", " ".join(f"{s:.0f}" for s in seen), f"| best {min(seen):.0f}")


if __name__ == "__main__":
    main()

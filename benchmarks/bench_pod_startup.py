"""Time to first batch and memory per process of PackedTokens over corpora of 10^7 and 10^8 documents, with
their offline document index and packing plan (the derived files a pod reads at startup).

Each start runs in a fresh process, as each of a pod host's worker processes does. The derived files are real
(8 bytes per document for the index, 32 per piece and 8 per window for the plan: 4 GB at 10^8 documents); the
token shard is a sparse file of the right size (only the pages a batch reads are ever touched), read with
DEW_VERIFY=0 because a sparse shard has no checksum worth computing. The derived files are still checked:
the first process on a host reads each once for its CRC-32s and caches the verdict, which is reported apart
from the starts that follow. Target: 10^8 documents start within 1.2x the time and +50 MB the RSS of 10^7.

Run: .venv/bin/python benchmarks/bench_pod_startup.py
"""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
import tempfile
import time

import numpy as np

BASELINE = "the same derived files loaded whole with np.load in a fresh process, as dew once read them"
SIZES = (10**7, 10**8)
WINDOW, BINS, BATCH = 128, 8, 8  # one document a window: the plan is written directly, not planned
NEEDED = 5 * 10**9  # bytes of derived files at 10^8 documents, with room to spare


def write_corpus(directory: str, documents: int) -> None:
    """A sparse one-shard .bin of `documents` documents of WINDOW ids, its meta.json and its derived files."""
    from dew.data import formats
    from dew.data.packing import DOCUMENTS, PackingPlan, packing_name, save_document_ends
    from dew.data.sections import TokensSection

    os.makedirs(directory)
    name = formats.shard_name("train", 0, 1, "bin")
    size = documents * WINDOW * 2
    with open(os.path.join(directory, name), "wb") as f:
        f.truncate(size)
    shard = formats.Shard(name=name, records=documents, units=documents * WINDOW, bytes=size, sha256="0" * 64)
    section = TokensSection(tokenizer="bench", tokenizer_hash="0" * 64, vocab_size=50000, dtype="uint16", eos_id=1)
    meta = formats.Meta(section=section, splits={"train": (shard,)})
    formats.write_meta(directory, meta)
    fingerprint = meta.fingerprint()
    ends = np.arange(1, documents + 1, dtype=np.int64) * WINDOW
    save_document_ends(formats.derived_path(directory, "train", DOCUMENTS), fingerprint, ends)
    del ends
    count = np.arange(documents + 1, dtype=np.int64)
    plan = PackingPlan(
        window=WINDOW,
        bins=BINS,
        offsets=count,
        documents=count[:-1],
        starts=np.broadcast_to(np.int64(0), (documents,)),
        lengths=np.broadcast_to(np.int64(WINDOW), (documents,)),
    )
    plan.save(formats.derived_path(directory, "train", packing_name(WINDOW, BINS)), fingerprint)


def child(directory: str, mode: str) -> None:
    """One start in this fresh process: prints {"seconds", "rss_mb"} as JSON."""
    import psutil

    from dew.data import DataPartition, Loading, PackedTokens, formats

    start = time.perf_counter()
    if mode == "loaded":
        arrays = [np.load(os.path.join(directory, f)) for f in sorted(os.listdir(directory)) if f.endswith(".npz")]
        held = [{key: data[key] for key in data.files} for data in arrays]
        assert held and formats.read_meta(directory)
    else:
        spec = PackedTokens(
            path=directory, seq_len=WINDOW - 1, packing_bins=BINS, val_batches=0, loading=Loading(workers=0, threads=2)
        )
        with spec.load(batch=BATCH).train(DataPartition()) as stream:
            next(stream)
    seconds = time.perf_counter() - start
    memory = psutil.Process().memory_info()
    # The derived files are read in place with pread (dew.data.paged), so RSS holds what the process read;
    # "private" (RSS less file-backed shared pages) is reported beside it.
    print(
        json.dumps(
            {"seconds": seconds, "rss_mb": memory.rss / 2**20, "private_mb": (memory.rss - memory.shared) / 2**20}
        )
    )


def start(directory: str, mode: str, cache: str) -> dict[str, float]:  # one fresh process
    env = {**os.environ, "DEW_VERIFY": "0", "DEW_CACHE_DIR": cache}
    out = subprocess.run(
        [sys.executable, __file__, "--child", directory, mode], env=env, check=True, capture_output=True, text=True
    )
    return json.loads(out.stdout.strip().splitlines()[-1])


def main() -> None:
    print(f"baseline: {BASELINE}")
    root = tempfile.mkdtemp(prefix="dew-bench-pod-")
    try:
        sizes = SIZES
        if shutil.disk_usage(root).free < NEEDED:
            sizes = tuple(n // 10 for n in SIZES)
            print(f"less than {NEEDED / 1e9:.0f} GB free under {root}: measuring {sizes} documents instead")
        results: dict[int, dict[str, dict[str, float]]] = {}
        for documents in sizes:
            directory = os.path.join(root, str(documents))
            began = time.perf_counter()
            write_corpus(directory, documents)
            derived = sum(os.path.getsize(os.path.join(directory, f)) for f in os.listdir(directory) if ".npz" in f)
            cache = os.path.join(root, f"cache-{documents}")
            first = start(directory, "in_place", cache)  # the host's first process verifies the derived files
            runs = [start(directory, "in_place", cache) for _ in range(5)]  # ms-scale starts: the best of 5
            loaded = [start(directory, "loaded", cache) for _ in range(2)]
            best = min(runs, key=lambda r: r["seconds"])
            whole = min(loaded, key=lambda r: r["seconds"])
            results[documents] = {"in_place": best, "loaded": whole}
            print(
                f"{documents:>11,} documents, {derived / 1e9:5.2f} GB derived (written in "
                f"{time.perf_counter() - began:5.1f} s): first batch {best['seconds'] * 1e3:7.1f} ms, "
                f"RSS {best['rss_mb']:6.1f} MB ({best['private_mb']:6.1f} private) | "
                f"host's first process (verifies) {first['seconds'] * 1e3:7.1f} ms | "
                f"baseline np.load {whole['seconds'] * 1e3:7.1f} ms, RSS {whole['rss_mb']:7.1f} MB"
            )
            shutil.rmtree(directory)
        small, large = (results[n] for n in sizes)
        ratio = large["in_place"]["seconds"] / small["in_place"]["seconds"]
        grown = large["in_place"]["rss_mb"] - small["in_place"]["rss_mb"]
        print(f"{sizes[1]:,} / {sizes[0]:,} documents, time to first batch: {ratio:.2f}x (target <= 1.2)")
        private = large["in_place"]["private_mb"] - small["in_place"]["private_mb"]
        print(f"{sizes[1]:,} / {sizes[0]:,} documents, RSS per process: {grown:+.1f} MB (target <= +50 MB)")
        print(f"{sizes[1]:,} / {sizes[0]:,} documents, private memory per process: {private:+.1f} MB")
        baseline_ratio = large["loaded"]["seconds"] / small["loaded"]["seconds"]
        baseline_grown = large["loaded"]["rss_mb"] - small["loaded"]["rss_mb"]
        print(f"baseline (np.load whole): {baseline_ratio:.2f}x the time, {baseline_grown:+.1f} MB RSS per process")
    finally:
        shutil.rmtree(root, ignore_errors=True)


if __name__ == "__main__":
    if sys.argv[1:2] == ["--child"]:
        child(sys.argv[2], sys.argv[3])
    else:
        main()

"""HF and TFDS providers: reading whole batches by index, against each library's own batched read.

1. HFDatasetSource.read_batch against HF datasets' own batched indexing of the same shuffled batches:
   `dataset[indices]` (one Arrow take), each column then np.asarray'd. That measured faster here than
   `with_format("numpy")` or an Arrow-format take with to_numpy.
2. TFDSRecords.read_batch against the TFDS data source's own `__getitems__(indices)` of the same
   batches, collated into columns.
3. The whole training stream of HubDataset (shuffled order, shares, Grain) against (1)'s batch reads:
   the ratio is what the stream costs over the reads it makes.
Run: .venv/bin/python benchmarks/bench_providers.py
"""

from __future__ import annotations

import os
import sys
import tempfile
from pathlib import Path

import numpy as np

sys.path.insert(0, os.path.join(os.path.dirname(__file__), ".."))

from benchmarks.timing import rate
from dew.data import DataPartition, HFDatasetSource, HubDataset, Loading, TFDSOptions
from dew.data.records import collate
from tests.runtime.providers_support import prepare_tfds

BASELINE = (
    "hf: datasets' own dataset[indices] of the same batches, columns np.asarray'd; tfds: the data source's "
    "own __getitems__(indices), collated; stream: dew's own read_batch of (1)"
)
BATCH = 256


def batches_of(size: int, seed: int = 0) -> list[np.ndarray]:
    order = np.random.default_rng(seed).permutation(size)
    return [order[i : i + BATCH] for i in range(0, size - BATCH + 1, BATCH)]


def report(name: str, ours: float, baseline: float, unit: str = "records/s") -> None:
    print(f"{name}: {ours:,.0f} {unit} vs baseline {baseline:,.0f} {unit} -> ratio {ours / baseline:.1f}x")


def bench_hf(root: Path) -> float:
    import datasets as hf

    size = 100_000
    table = hf.Dataset.from_dict(
        {"n": np.arange(size), "text": [f"document {i} " * 4 for i in range(size)], "vec": np.ones((size, 8))}
    )
    saved = root / "hf"
    table.save_to_disk(str(saved))
    source = HFDatasetSource(str(saved), "train")
    batches = batches_of(size)
    it = iter(range(10**9))

    def ours() -> None:
        source.read_batch(batches[next(it) % len(batches)])

    table = hf.load_from_disk(str(saved))

    def plain() -> None:
        {name: np.asarray(column) for name, column in table[batches[next(it) % len(batches)]].items()}

    ours_rate = rate(ours, BATCH)
    report("hf read_batch", ours_rate, rate(plain, BATCH))
    return ours_rate


def bench_tfds(root: Path) -> None:
    size = 20_000
    prepare_tfds(root / "tfds", size=size)
    source = TFDSOptions(path=str(root / "tfds"), config="small").source("dew_tiny", "train")
    batches = batches_of(size)
    it = iter(range(10**9))

    def ours() -> None:
        source.read_batch(batches[next(it) % len(batches)])

    opened = source.open()

    def plain() -> None:
        collate(opened.__getitems__(batches[next(it) % len(batches)].tolist()))

    report("tfds read_batch", rate(ours, BATCH), rate(plain, BATCH))


def bench_stream(root: Path, reads: float) -> None:
    spec = HubDataset(name=str(root / "hf"), seed=0, loading=Loading(workers=0, threads=2, read_buffer=2 * BATCH))
    stream = spec.load(batch=BATCH).train(DataPartition())
    try:
        report("hf training stream", rate(lambda: next(stream), BATCH), reads)
    finally:
        stream.close()


def main() -> None:
    print(f"baseline: {BASELINE}")
    with tempfile.TemporaryDirectory() as tmp:
        root = Path(tmp)
        reads = bench_hf(root)
        bench_stream(root, reads)
        bench_tfds(root)


if __name__ == "__main__":
    main()

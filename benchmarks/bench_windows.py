"""TokenWindows training stream vs raw memmap slicing and a per-record Grain pipeline (batch 32 × 2049).

Prints tokens/s for each and the ratios. Run: .venv/bin/python benchmarks/bench_windows.py
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

BATCH, SEQ, STEPS = 32, 2048, 150


def rate(label: str, fn, steps: int) -> float:
    fn(3)  # warm up
    start = time.perf_counter()
    fn(steps)
    tokens_per_s = steps * BATCH * (SEQ + 1) / (time.perf_counter() - start)
    print(f"{label:<42} {tokens_per_s / 1e6:8.1f} M tokens/s")
    return tokens_per_s


def main() -> None:
    import grain

    from dew.data import DataPartition, Loading, TokenWindows
    from dew.data.order import permute

    directory = tempfile.mkdtemp()
    path = f"{directory}/train.bin"
    np.random.default_rng(0).integers(0, 50000, size=60_000_000, dtype=np.uint16).tofile(path)
    windows = (60_000_000 - 1) // SEQ
    memmap = np.memmap(path, dtype=np.uint16, mode="r")

    def raw(steps: int) -> None:  # the same shuffled windows, sliced straight off the memmap
        for step in range(steps):
            ids = permute(np.arange(step * BATCH, (step + 1) * BATCH), windows, 0, 0)
            np.stack([memmap[i * SEQ : i * SEQ + SEQ + 1] for i in ids.tolist()]).astype(np.int32)

    def per_record(steps: int) -> None:  # the plain Grain way: one window a map call, batched by grain
        source = grain.MapDataset.range(windows).shuffle(seed=0)
        ds = source.map(
            lambda i: np.asarray(
                np.memmap(path, dtype=np.uint16, mode="r")[i * SEQ : i * SEQ + SEQ + 1], dtype=np.int32
            )
        )
        it = iter(ds.batch(BATCH).to_iter_dataset(grain.ReadOptions(num_threads=2, prefetch_buffer_size=64)))
        for _ in range(steps):
            next(it)

    def ours(workers: int):
        # One stream per setting, warmed up by rate() before timing: worker start-up is not throughput.
        spec = TokenWindows(
            path=path, seq_len=SEQ, val_batches=0, loading=Loading(workers=workers, threads=2, read_buffer=64)
        )
        stream = spec.load(batch=BATCH).train(DataPartition())

        def run(steps: int) -> None:
            for _ in range(steps):
                next(stream)

        return run, stream

    base = rate("raw numpy memmap slicing", raw, STEPS)
    grain_rate = rate("grain MapDataset, one window per record", per_record, STEPS // 3)
    run, stream = ours(0)
    serial = rate("TokenWindows, workers=0", run, STEPS)
    stream.close()
    run, stream = ours(2)
    run(20)  # let both workers start and fill their buffers
    parallel = rate("TokenWindows, workers=2", run, STEPS)
    stream.close()
    print(f"TokenWindows/raw memmap            {serial / base:5.2f}x  (target >= 0.5x)")
    print(f"TokenWindows/per-record grain      {serial / grain_rate:5.2f}x  (target >= 1.5x)")
    print(f"workers=2 / workers=0 scaling      {parallel / serial:5.2f}x  (2 shared cores)")


if __name__ == "__main__":
    main()

"""Restoring a data position at record 10**9 against a fresh start, for windows and a mixture.

Both are index arithmetic, so the restore should cost what a fresh start costs.
Run: .venv/bin/python benchmarks/bench_resume.py
"""

from __future__ import annotations

import tempfile
import time

import numpy as np

BASELINE = "a fresh start of the same stream and seed: best of 20 first batches, median over 12 seeds"


def first_batch(reader, state=None) -> float:
    from dew.data import DataPartition

    start = time.perf_counter()
    with reader(DataPartition()) as stream:
        if state is not None:
            stream.set_state(state)
        next(stream)
        return time.perf_counter() - start  # up to the batch in hand; close is not start-up


def compare(label: str, reader_for) -> None:
    """Median over several seeds of the best-of-20 first batch, fresh and restored at record ~1e9.

    One batch's cost depends on which records it holds (the shuffle's cycle walking, the pages it
    touches), so a single fresh batch against a single restored one compares two different batches;
    the median over seeds and positions compares the two ways of starting instead.
    """
    from dew.data import DataPartition

    fresh_times, restored_times = [], []
    for seed in range(12):
        reader = reader_for(seed)
        with reader(DataPartition()) as stream:
            state = {**stream.get_state(), "records": 10**9 + 32 * seed}
        first_batch(reader)  # warm the imports and the page cache
        fresh_times.append(min(first_batch(reader) for _ in range(20)))
        restored_times.append(min(first_batch(reader, state) for _ in range(20)))
    fresh, restored = float(np.median(fresh_times)), float(np.median(restored_times))
    print(
        f"{label:<22} fresh {1e3 * fresh:6.1f} ms, at record 1e9 {1e3 * restored:6.1f} ms: {restored / fresh:4.2f}x"
        " (target <= 1.2x)"
    )


def main() -> None:
    print(f"baseline: {BASELINE}")
    from dew.data import Loading, TokenWindows
    from dew.data.dataset import global_dataset
    from dew.data.mixture import Corpus, MixtureOrder
    from dew.data.tokens import TokenBytes, TokenWindowSource

    directory = tempfile.mkdtemp()
    np.random.default_rng(0).integers(0, 50000, size=20_000_000, dtype=np.uint16).tofile(f"{directory}/a.bin")
    np.random.default_rng(1).integers(0, 50000, size=7_000_000, dtype=np.uint16).tofile(f"{directory}/b.bin")
    serial = Loading(workers=0, threads=2, read_buffer=64)

    def windows(seed: int):
        spec = TokenWindows(path=f"{directory}/a.bin", seq_len=2048, val_batches=0, seed=seed, loading=serial)
        return spec.load(batch=32).train

    def mixed(seed: int):
        order = MixtureOrder(
            [
                Corpus("a", TokenWindowSource(TokenBytes(f"{directory}/a.bin"), 2048), 0.7),
                Corpus("b", TokenWindowSource(TokenBytes(f"{directory}/b.bin"), 2048), 0.3),
            ],
            seed=seed,
        )
        return global_dataset(
            train=None, val=None, batch=32, seed=seed, loading=serial, val_batches=None, order=order
        ).train

    compare("TokenWindows", windows)
    compare("mixture of two corpora", mixed)


if __name__ == "__main__":
    main()

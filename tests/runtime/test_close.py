"""Iterators own what they start: after close no worker process, thread or shared memory of theirs remains."""

from __future__ import annotations

import gc
import os
import threading
import time
from typing import Any

import numpy as np
import psutil
import pytest

from dew.data import DataPartition, Loading
from dew.data.dataset import global_dataset


def _shared_memory_of(processes: list[psutil.Process]) -> set[str]:
    """The /dev/shm segments these processes map: ours, even while other programs use /dev/shm too."""
    names = set()
    for process in processes:
        try:
            names |= {m.path for m in process.memory_maps() if m.path.startswith("/dev/shm/")}
        except psutil.Error:
            continue
    return names


def _settled(check, seconds: float) -> bool:
    deadline = time.monotonic() + seconds
    while time.monotonic() < deadline:
        if check():
            return True
        time.sleep(0.1)
    return check()


@pytest.mark.slow
@pytest.mark.parametrize("workers", [0, 2])
def test_close_leaves_no_process_thread_or_shared_memory(workers: int) -> None:
    loading = Loading(workers=workers, threads=4, read_buffer=16, worker_buffer=2)
    data = global_dataset(
        train=np.arange(500, dtype=np.int64), val=None, batch=8, seed=0, loading=loading, val_batches=None
    )
    # Python's resource tracker and grain's shared-memory cleanup pool are process-wide singletons that
    # the first multiprocess stream starts once; a warm-up run leaves them in the baseline.
    with data.train(DataPartition()) as warm_up:
        next(warm_up)
    me = psutil.Process()
    children, threads = set(me.children(recursive=True)), set(threading.enumerate())
    stream = data.train(DataPartition())
    first = [next(stream) for _ in range(5)]
    assert all(len(b) == 8 for b in first)
    ours = _shared_memory_of([me, *me.children(recursive=True)])
    if workers:
        assert set(me.children(recursive=True)) - children, "workers=2 should start worker processes"
    stream.close()
    # A batch from a worker lives in shared memory for as long as the caller holds it.
    del first
    gc.collect()
    assert _settled(lambda: not (set(me.children(recursive=True)) - children), loading.stop_seconds)
    assert _settled(lambda: not [t for t in set(threading.enumerate()) - threads if t.is_alive()], loading.stop_seconds)
    assert _settled(lambda: not [path for path in ours if os.path.exists(path)], loading.stop_seconds)
    with pytest.raises(RuntimeError, match="closed"):
        next(stream)


def test_workers_do_not_change_the_batches() -> None:
    def batches(workers: int) -> list[np.ndarray]:
        loading = Loading(workers=workers, threads=2, read_buffer=8, worker_buffer=1)
        data = global_dataset(
            train=np.arange(97, dtype=np.int64), val=None, batch=4, seed=9, loading=loading, val_batches=None
        )
        with data.train(DataPartition(index=1, count=2)) as stream:
            return [next(stream) for _ in range(30)]

    for serial, parallel in zip(batches(0), batches(2), strict=True):
        np.testing.assert_array_equal(serial, parallel)


class _SlowSource:
    """Records whose batch reads take a while, counting the reads still running."""

    def __init__(self) -> None:
        self.running = 0
        self.lock = threading.Lock()

    def __len__(self) -> int:
        return 1000

    def __getitem__(self, index: int) -> int:
        return index

    def read_batch(self, indices: np.ndarray) -> np.ndarray:
        with self.lock:
            self.running += 1
        time.sleep(0.2)
        with self.lock:
            self.running -= 1
        return np.asarray(indices)


def test_close_waits_for_a_read_in_flight_and_refuses_the_next() -> None:
    # In process a step is read in the thread that asks for it; a close from another thread must
    # still return only after that read, which could touch a memmap the caller is about to rewrite.
    source = _SlowSource()
    # One reader thread, so the first read to start is the first step's, the one next() waits for: with
    # more, a later step's prefetch may start first, and close would rightly turn the first step away.
    loading = Loading(workers=0, threads=1, read_buffer=64)
    data = global_dataset(train=source, val=None, batch=4, seed=0, loading=loading, val_batches=None)
    stream = data.train(DataPartition())
    got: list[Any] = []

    def read() -> None:
        try:
            got.append(next(stream))
        except RuntimeError as error:  # grain still queueing the first step's reads when the close came
            got.append(error)

    reader = threading.Thread(target=read)
    reader.start()
    assert _settled(lambda: source.running > 0, 2.0), "the read should have started"
    stream.close()
    assert source.running == 0, "close returns only once the read in flight has ended"
    reader.join()
    assert len(got) == 1
    # The read in flight completes; its step is handed over whole, or turned away naming the close
    # when grain was still queueing that step's reads as the close came (seen on a loaded machine).
    if isinstance(got[0], RuntimeError):
        assert "closed during this read" in str(got[0])
    else:
        assert len(got[0]) == 4
    with pytest.raises(RuntimeError, match="closed"):
        next(stream)

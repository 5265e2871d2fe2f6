"""The fetch pool of an online reader: worker processes of fetch threads, each stacking whole batches.

Each worker walks its own part of the reader's share (online_rows.walk), fetches and decodes with
threads, squares the images and hands whole batches to one queue the reader takes from. Drops are
counted per worker in shared memory, so the reader sees them while the run goes, even when nothing
arrives at all. Workers run as spawned processes (a fork of a trainer holding threads is unsafe), or,
with Loading.workers == 0, as one worker of threads inside the reader's own process.
"""

from __future__ import annotations

import dataclasses
import multiprocessing
import os
import queue
import threading
import time
import traceback
import zlib
from typing import Any

import numpy as np

from dew.data.images import pixels
from dew.data.images.fetch import DROP_REASONS, Dropped, FetchClosed, Fetcher, FetchPolicy, fetch_image
from dew.data.images.online_rows import UrlRows, walk
from dew.data.loading import Loading
from dew.data.workers import check_main_guard, exit_with_parent

FETCHED = "fetched"
SLOTS = (FETCHED, *DROP_REASONS)
THREADS_PER_CORE = 64  # decode is ~2 ms a photo: 64 fetches in flight already keep a core busy at web latency
MAX_THREADS = 256  # img2dataset's most per process; beyond it a process spends its time switching threads
_TICK = 0.25
HOST_BUCKETS = 1 << 16  # the shared per-host counts (HostSlots): 256 KiB, so that few hosts in flight share one
_POLL = 0.02


def fit(loading: Loading, rows: int, cores: int | None = None) -> tuple[int, int]:
    """(processes, threads per process) that `loading` becomes on this host for a share of `rows`.

    One core stays with the trainer, and no more processes start than the cores left (nor than rows
    to give them); threads are capped at THREADS_PER_CORE for each core a process has, and MAX_THREADS.
    workers == 0 keeps one worker in the reader's process: (0, threads).
    """
    cores = cores or len(os.sched_getaffinity(0))
    spare = max(1, cores - 1)
    processes = min(loading.workers, spare, rows)
    threads = min(loading.threads, MAX_THREADS, max(1, THREADS_PER_CORE * spare // max(processes, 1)))
    return processes, threads


@dataclasses.dataclass(frozen=True)
class Plan:
    """What every worker of one reader needs, sent to each once."""

    rows: UrlRows
    seed: int
    index: int
    count: int
    batch: int
    image_size: int
    min_image_size: int
    timeout: float
    retries: int
    policy: FetchPolicy
    convert_to_rgb: bool


class HostSlots:
    """The per_host limit over every worker process of a reader: the requests in flight to each host, counted
    in shared memory. Hosts are counted in HOST_BUCKETS buckets by a hash of their origin (two hosts meeting
    in one bucket share its limit, never exceed it); a worker waiting for a slot looks again every _POLL s."""

    def __init__(self, context: Any, limit: int) -> None:
        self.limit = limit
        self._counts = context.RawArray("i", HOST_BUCKETS)
        self._lock = context.Lock()

    def acquire(self, origin: tuple[str, str, int], timeout: float) -> bool:
        """Takes one of the host's slots within `timeout` seconds; whether it did."""
        at, until = _bucket(origin), time.monotonic() + timeout
        while True:
            with self._lock:
                if self._counts[at] < self.limit:
                    self._counts[at] += 1
                    return True
            if time.monotonic() >= until:
                return False
            time.sleep(_POLL)

    def release(self, origin: tuple[str, str, int]) -> None:
        with self._lock:
            self._counts[_bucket(origin)] -= 1


def _bucket(origin: tuple[str, str, int]) -> int:
    return zlib.crc32(repr(origin).encode()) % HOST_BUCKETS  # not hash(): it differs from process to process


def work(
    plan: Plan, worker: int, workers: int, threads: int, out: Any, stop: Any, counts: Any, slots: Any = None
) -> None:
    """One worker: `threads` fetch threads over its part of the share until `stop` is set; `slots` (HostSlots)
    holds the per-host limit for all the workers together."""
    # Each process takes its share of the per-host limit, and the shared slots keep the total to it.
    policy = dataclasses.replace(plan.policy, per_host=max(1, -(-plan.policy.per_host // workers)))
    fetcher = Fetcher(timeout=plan.timeout, retries=plan.retries, policy=policy, shared=slots)
    rules = pixels.ImageRules(min_size=plan.min_image_size)
    chunks = walk(len(plan.rows), plan.seed, plan.index, plan.count, worker, workers)
    base = worker * len(SLOTS) if workers > 1 else 0
    feed_lock, batch_lock, count_lock = threading.Lock(), threading.Lock(), threading.Lock()
    pending: list[tuple[str, str]] = []
    images: list[np.ndarray] = []
    captions: list[str] = []

    def put(message: tuple[Any, ...]) -> None:
        while not stop.is_set():
            try:
                out.put(message, timeout=_TICK)
                return
            except queue.Full:
                continue

    def count(slot: str) -> None:
        with count_lock:
            counts[base + SLOTS.index(slot)] += 1

    def next_row() -> tuple[str, str]:
        with feed_lock:
            if not pending:
                urls, texts = plan.rows.read(next(chunks))
                pending.extend(reversed(list(zip(urls, texts, strict=True))))
            return pending.pop()

    def fetch() -> None:
        try:
            while not stop.is_set():
                url, caption = next_row()
                try:
                    found = fetch_image(fetcher, url, rules=rules, size=plan.image_size, convert=plan.convert_to_rgb)
                    image = pixels.square(found, plan.image_size)
                except Dropped as dropped:
                    count(dropped.reason)
                    continue
                count(FETCHED)
                # The put happens under the lock: while the queue is full every thread stops at its next
                # image, so a reader that stops taking batches holds at most one image per thread.
                with batch_lock:
                    images.append(image)
                    captions.append(caption)
                    if len(images) == plan.batch:
                        put(("batch", np.stack(images), list(captions)))
                        images.clear()
                        captions.clear()
        except FetchClosed:
            return
        except BaseException:
            put(("error", f"fetch worker {worker}:\n{traceback.format_exc()}"))

    pool = [threading.Thread(target=fetch, name=f"dew-fetch-{worker}-{i}", daemon=True) for i in range(threads)]
    for thread in pool:
        thread.start()
    stop.wait()
    fetcher.close()
    for thread in pool:
        thread.join()


def _process_main(parent: int, *args: Any) -> None:
    # A trainer killed outright (SIGKILL, the OOM killer) runs no close(): the worker sees it gone and exits.
    exit_with_parent(parent)
    out = args[4]
    work(*args)
    # Batches no one will take must not keep this process from exiting.
    out.cancel_join_thread()


class FetchPool:
    """Starts the workers of one reader; `get` takes their batches, `close` ends every one of them."""

    def __init__(self, plan: Plan, loading: Loading, rows: int) -> None:
        self.processes, self.threads = fit(loading, rows)
        self._stop_grace = loading.stop_seconds
        self._workers: list[Any] = []
        if self.processes:
            # Spawned fetchers re-run the main script as grain's workers do: an unguarded one is refused here.
            check_main_guard()
            context = multiprocessing.get_context("spawn")
            self._out: Any = context.Queue(maxsize=self.processes * loading.worker_buffer)
            self._stop: Any = context.Event()
            self._counts: Any = context.RawArray("q", self.processes * len(SLOTS))
            # Held here: a started Process lets go of its args, and the lock must outlive the workers' start.
            self._slots = HostSlots(context, plan.policy.per_host) if self.processes > 1 else None
            for worker in range(self.processes):
                shared = (self._out, self._stop, self._counts, self._slots)
                args = (os.getpid(), plan, worker, self.processes, self.threads, *shared)
                self._workers.append(
                    context.Process(target=_process_main, args=args, name=f"dew-fetch-{worker}", daemon=True)
                )
        else:
            self._out = queue.Queue(maxsize=loading.worker_buffer)
            self._stop = threading.Event()
            self._counts = [0] * len(SLOTS)
            own = (plan, 0, 1, self.threads, self._out, self._stop, self._counts)
            self._workers.append(threading.Thread(target=work, args=own, name="dew-fetch", daemon=True))
        for worker in self._workers:
            worker.start()

    def counts(self) -> dict[str, int]:
        """Rows fetched and dropped by reason, over every worker so far."""
        totals = np.asarray(self._counts[:], dtype=np.int64).reshape(-1, len(SLOTS)).sum(axis=0)
        return dict(zip(SLOTS, totals.tolist(), strict=True))

    def get(self, timeout: float) -> tuple[np.ndarray, list[str]] | None:
        """The next batch (images, captions), or None when none came within `timeout` seconds."""
        try:
            message = self._out.get(timeout=timeout)
        except queue.Empty:
            dead = [w for w in self._workers if not w.is_alive()]
            if dead and not self._stop.is_set():
                code = getattr(dead[0], "exitcode", None)
                raise RuntimeError(f"fetch worker {dead[0].name} ended on its own (exit code {code})") from None
            return None
        if message[0] == "error":
            raise RuntimeError(message[1])
        return message[1], message[2]

    def stop(self) -> None:
        """Tells every worker to stop; safe from any thread."""
        self._stop.set()

    def close(self) -> None:
        """Stops the workers and waits for them; a process that does not stop in time is killed."""
        self.stop()
        for worker in self._workers:
            worker.join(timeout=self._stop_grace)
        for worker in self._workers:
            if isinstance(worker, threading.Thread):
                if worker.is_alive():
                    raise RuntimeError(f"{worker.name} was still fetching {self._stop_grace:.0f} s after close")
                continue
            if worker.is_alive():
                worker.kill()
                worker.join()
            worker.close()
        if self.processes:
            self._out.close()
            self._out.join_thread()
        self._workers = []

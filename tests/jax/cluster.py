"""A real jax.distributed cluster of CPU processes on 127.0.0.1, and the checks every worker runs per mesh.

The parent test calls `run`, which starts one `python -m <worker> <process_id> <port> <out>` per process
and waits for all of them within a deadline; a worker calls `join` first and writes what it saw to
<out>/process-<id>.json. Nothing here is collected by pytest.
"""

from __future__ import annotations

import json
import os
import signal
import socket
import subprocess
import sys
import time
from pathlib import Path
from typing import Any

import numpy as np

ROOT = Path(__file__).resolve().parents[2]


def free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


def run(worker: str, processes: int, out: Path, *, timeout: float, env: dict[str, str] | None = None) -> list[dict]:
    """Runs `processes` copies of the module `worker` as one cluster and returns their reports.

    Every process is killed by the time this returns: at the deadline, or as soon as one exits with an
    error, since the others would otherwise wait in a collective for it until the deadline.
    """
    port = free_port()
    environ = {**os.environ, "JAX_PLATFORMS": "cpu", "PYTHONPATH": str(ROOT), **(env or {})}
    if env is None or "XLA_FLAGS" not in env:
        environ.pop("XLA_FLAGS", None)
    logs = [open(out / f"log-{i}.txt", "w") for i in range(processes)]  # noqa: SIM115 - closed below
    procs: list[subprocess.Popen] = []
    try:
        for i in range(processes):
            command = [sys.executable, "-m", worker, str(i), str(port), str(out)]
            procs.append(subprocess.Popen(command, cwd=ROOT, env=environ, stdout=logs[i], stderr=subprocess.STDOUT))
        deadline = time.monotonic() + timeout
        while time.monotonic() < deadline:
            codes = [p.poll() for p in procs]
            if all(c is not None for c in codes) or any(c not in (None, 0) for c in codes):
                break
            time.sleep(0.2)
    finally:
        running = [p for p in procs if p.poll() is None]
        stuck = [i for i, p in enumerate(procs) if p in running]
        for p in running:  # join() has each worker print where it is stuck on SIGUSR1
            p.send_signal(signal.SIGUSR1)
        if running:
            time.sleep(1)
        for p in running:
            p.kill()
        for p in procs:
            p.wait()
        for log in logs:
            log.close()
    text = f"processes {stuck} were still running and were killed; " if stuck else ""
    text += "\n".join(
        f"--- process {i} (rc={p.returncode}) ---\n" + (out / f"log-{i}.txt").read_text()[-4000:]
        for i, p in enumerate(procs)
    )
    assert all(p.returncode == 0 for p in procs), text
    return [json.loads((out / f"process-{i}.json").read_text()) for i in range(processes)]


def join(process_id: int, processes: int, port: int, devices: int) -> None:
    """Worker side: this process's `devices` CPU devices join the cluster the parent started."""
    import faulthandler

    import jax

    faulthandler.register(signal.SIGUSR1, all_threads=False)
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", devices)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}",
        num_processes=processes,
        process_id=process_id,
        initialization_timeout=60,
    )


class _Broken:
    def __next__(self) -> None:
        raise OSError("disk gone")


def check_mesh(name: str, mesh: Any, report: dict[str, Any]) -> None:
    """Worker side: this process's share of the tiny dataset under `mesh`, checked against the global
    batches it can read alone, as global arrays, handed from first readers, and ending together."""
    import jax

    from dew.data import DataPartition
    from dew.data.distributed import data_partition, first_reader_batch, global_batch_array
    from tests.jax.cases import BATCH, STEPS, dataset, expected_global_array, read_steps

    data = dataset()
    whole = read_steps(data.train, DataPartition(), STEPS)
    part = data_partition(mesh)
    report.setdefault("partitions", {})[name] = [part.index, part.count, part.readers, part.reader]
    mine = read_steps(data.train, part, STEPS)
    for step in range(STEPS):
        np.testing.assert_array_equal(mine[step], whole[step][part.index :: part.count], err_msg=f"{name} {step}")
        array = global_batch_array(mine[step], mesh)
        assert array.shape == (BATCH,), array.shape
        want = expected_global_array(whole[step], array.sharding, mesh)
        for shard in array.addressable_shards:
            np.testing.assert_array_equal(np.asarray(shard.data), want[shard.index], err_msg=f"{name} {step}")
        total = jax.jit(lambda x: x.sum())(array)  # a collective over every process's rows
        assert int(total) == int(whole[step].sum()), (name, step, int(total))
    # Handing over: only the first reader opens the stream, and what every reader gets is its share.
    stream = data.train(part) if part.reader == 0 else None
    handed = [first_reader_batch(stream, mesh) for _ in range(STEPS)]
    if stream is not None:
        stream.close()
    for step in range(STEPS):
        np.testing.assert_array_equal(handed[step], mine[step], err_msg=f"first reader {name} {step}")
    report.setdefault("first_reader", {})[name] = [h.tolist() for h in handed]
    # A finite pass ends on every reader together.
    val = data.val(part) if part.reader == 0 else None
    steps = 0
    try:
        while True:
            first_reader_batch(val, mesh)
            steps += 1
    except StopIteration:
        pass
    if val is not None:
        val.close()
    report.setdefault("val_steps", {})[name] = steps
    if part.readers > 1:  # a first reader that fails tells the others rather than leaving them waiting
        try:
            first_reader_batch(_Broken() if part.reader == 0 else None, mesh)
        except (OSError, RuntimeError) as failure:
            report.setdefault("failure", {})[name] = f"{type(failure).__name__}: {failure}"

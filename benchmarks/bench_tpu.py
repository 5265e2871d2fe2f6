"""What the pod helpers add to a step, against the read they sit behind, measured in the same run.

- global_batch_array: this process's share as one jax.Array over an 8-device mesh, against a plain
  jax.device_put of the same batch with the same sharding (the floor for placing it at all).
- first_reader_batch's hand-off (encode, collective, decode) on one process, against reading the same
  batch from the stream, the work a second reader would otherwise repeat.

Run: .venv/bin/python benchmarks/bench_tpu.py
"""

from __future__ import annotations

import time

import jax

jax.config.update("jax_platforms", "cpu")
jax.config.update("jax_num_cpu_devices", 8)

import numpy as np  # noqa: E402
from jax.sharding import Mesh  # noqa: E402

from dew.data import DataPartition, Loading  # noqa: E402
from dew.data import distributed as dist  # noqa: E402
from dew.data.dataset import global_dataset  # noqa: E402

BASELINE = (
    "global_batch_array: jax.device_put of the same batch with the same sharding; hand-off: reading the same "
    "batch from the stream, the work a second reader would repeat"
)
BATCH, SEQ, STEPS = 256, 1025, 40


def rate(fn, steps: int) -> float:
    fn()  # warm: compile, first allocation
    start = time.perf_counter()
    for _ in range(steps):
        fn()
    return steps / (time.perf_counter() - start)


def main() -> None:
    print(f"baseline: {BASELINE}")
    windows = np.random.default_rng(0).integers(0, 50_000, size=(4 * BATCH, SEQ), dtype=np.int32)
    data = global_dataset(
        train=windows, val=None, batch=BATCH, seed=0, loading=Loading(workers=0, threads=2), val_batches=None
    )
    mesh = Mesh(np.array(jax.devices()).reshape(4, 2), ("data", "sequence"))
    sharding = dist.batch_sharding(mesh)
    mb = BATCH * SEQ * 4 / 1e6

    with data.train(DataPartition()) as stream:
        batch = next(stream)
        read = rate(lambda: next(stream), STEPS)

    def placed() -> None:
        dist.global_batch_array(batch, mesh).block_until_ready()

    def put() -> None:
        jax.device_put(batch, sharding).block_until_ready()

    ours, floor = rate(placed, STEPS), rate(put, STEPS)
    print(f"global_batch_array: {ours:8.1f} batches/s ({ours * mb:7.1f} MB/s); device_put {floor:8.1f} batches/s")
    print(f"  ratio global_batch_array / device_put = {ours / floor:.2f}")

    layout = dist._Layout(partitions={0: DataPartition()}, devices={0: jax.devices()[0]})
    hand = dist._handoff(layout)

    def handed() -> None:
        dist._decode(*hand((dist._BATCH, dist._encode(batch))), DataPartition())

    moved = rate(handed, STEPS)
    print(f"hand-off (encode, collective, decode): {moved:8.1f} batches/s ({moved * mb:7.1f} MB/s)")
    print(f"stream read of the same batch:         {read:8.1f} batches/s ({read * mb:7.1f} MB/s)")
    print(f"  ratio hand-off / stream read = {moved / read:.2f}")


if __name__ == "__main__":
    main()

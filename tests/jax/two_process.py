"""One process of the two-process check, run by test_two_processes.py (not collected by pytest).

    python -m tests.jax.two_process <process_id> <coordinator port> <output dir>

Each process joins a real jax.distributed cluster on 127.0.0.1 with 4 CPU devices, reads its share
under several mesh arrangements, checks the global arrays it builds against the global batch it can
compute alone, hands batches from first readers, and saves a checkpoint with Orbax. It writes what it
saw to <output dir>/process-<id>.json for the parent test to compare.
"""

from __future__ import annotations

import json
import sys
from pathlib import Path

import jax
import numpy as np


class _Broken:
    def __next__(self) -> None:
        raise OSError("disk gone")


def main(process_id: int, port: int, out: Path) -> None:
    jax.config.update("jax_platforms", "cpu")
    jax.config.update("jax_num_cpu_devices", 4)
    jax.distributed.initialize(
        coordinator_address=f"127.0.0.1:{port}", num_processes=2, process_id=process_id, initialization_timeout=60
    )
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh

    from dew.data import DataPartition
    from dew.data.checkpoints import DataPositionSave
    from dew.data.distributed import data_partition, first_reader_batch, global_batch_array
    from tests.jax.cases import BATCH, STEPS, dataset, expected_global_array, meshes, read_steps

    data = dataset()
    whole = read_steps(data.train, DataPartition(), STEPS)
    report: dict = {"partitions": {}, "first_reader": {}}
    devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
    for name, (grid, axes) in meshes(devices).items():
        mesh = Mesh(grid, axes)
        part = data_partition(mesh)
        report["partitions"][name] = [part.index, part.count, part.readers, part.reader]
        mine = read_steps(data.train, part, STEPS)
        for step in range(STEPS):
            np.testing.assert_array_equal(mine[step], whole[step][part.index :: part.count], err_msg=f"{name} {step}")
            array = global_batch_array(mine[step], mesh)
            assert array.shape == (BATCH,), array.shape
            want = expected_global_array(whole[step], array.sharding, mesh)
            for shard in array.addressable_shards:
                np.testing.assert_array_equal(np.asarray(shard.data), want[shard.index], err_msg=f"{name} {step}")
            total = jax.jit(lambda x: x.sum())(array)  # a collective over both processes' rows
            assert int(total) == int(whole[step].sum()), (name, step, int(total))
        # Handing over: only the first reader opens the stream, and what every reader gets is its share.
        stream = data.train(part) if part.reader == 0 else None
        handed = [first_reader_batch(stream, mesh) for _ in range(STEPS)]
        if stream is not None:
            stream.close()
        for step in range(STEPS):
            np.testing.assert_array_equal(handed[step], mine[step], err_msg=f"first reader {name} {step}")
        report["first_reader"][name] = [h.tolist() for h in handed]
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

    # Orbax: the data position beside a model state sharded over both processes.
    mesh = Mesh(devices, ("data",))
    part = data_partition(mesh)
    stream = data.train(part)
    for _ in range(STEPS):
        batch = next(stream)
    state = {"w": global_batch_array(batch.astype(np.float32), mesh)}
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=True)
    with ocp.CheckpointManager(out / "ckpt", options=options) as manager:
        manager.save(STEPS, args=ocp.args.Composite(state=ocp.args.StandardSave(state), data=DataPositionSave(stream)))
        manager.wait_until_finished()
    report["saved"] = stream.get_state()
    stream.close()
    (out / f"process-{process_id}.json").write_text(json.dumps(report))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))

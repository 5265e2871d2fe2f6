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


def main(process_id: int, port: int, out: Path) -> None:
    from tests.jax.cluster import check_mesh, join

    join(process_id, 2, port, devices=4)
    import orbax.checkpoint as ocp
    from jax.sharding import Mesh

    from dew.data.checkpoints import DataPositionSave
    from dew.data.distributed import data_partition, global_batch_array
    from tests.jax.cases import STEPS, dataset, meshes

    data = dataset()
    report: dict = {}
    devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
    for name, (grid, axes) in meshes(devices).items():
        check_mesh(name, Mesh(grid, axes), report)

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

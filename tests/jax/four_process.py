"""One process of the four-process check, run by test_four_processes.py (not collected by pytest).

    python -m tests.jax.four_process <process_id> <coordinator port> <output dir>

Four processes of 2 CPU devices each join a real jax.distributed cluster on 127.0.0.1; under each mesh
of cases.pair_meshes two shares are read by two processes each. Besides the checks every worker runs
(cluster.check_mesh), the shares' first readers hand over payloads of different sizes, one share ends a
step early, and one share's first reader fails while the other's reads on. Each process writes what it
saw to <output dir>/process-<id>.json for the parent test to compare.
"""

from __future__ import annotations

import json
import sys
from collections.abc import Iterator
from pathlib import Path
from typing import Any

import jax
import numpy as np

# Token lengths per share and step: the larger payload on either share, across padded sizes, then equal.
SIZES = ((700, 3, 40), (5, 1100, 40))
# Share 1 has one step fewer than share 0.
UNEVEN = ((8, 8, 8), (8, 8))


class _Broken:
    def __next__(self) -> None:
        raise OSError("disk gone")


def _until_end(batches: Iterator[Any] | None, mesh: Any) -> tuple[list[Any], str]:
    """Hands batches over until the mesh stops, and how it stopped."""
    from dew.data.distributed import first_reader_batch

    got: list[Any] = []
    try:
        while len(got) < 10:  # a bound, so a share that never ends fails the test rather than running on
            got.append(first_reader_batch(batches, mesh))
    except StopIteration:
        return got, "end"
    except (OSError, RuntimeError) as failure:
        return got, f"{type(failure).__name__}: {failure}"
    return got, "no end"


def main(process_id: int, port: int, out: Path) -> None:
    from tests.jax.cluster import check_mesh, join

    join(process_id, 4, port, devices=2)
    from jax.experimental import multihost_utils
    from jax.sharding import Mesh

    from dew.data import DataPartition
    from dew.data.distributed import data_partition, global_batch_array
    from tests.jax.cases import STEPS, dataset, described, pair_meshes, read_steps, share_dataset

    report: dict = {"global_array": {}, "sizes": {}, "uneven": {}, "one_failed": {}}
    devices = np.array(sorted(jax.devices(), key=lambda d: (d.process_index, d.id)))
    data = dataset()
    for name, (grid, axes) in pair_meshes(devices).items():
        mesh = Mesh(grid, axes)
        check_mesh(name, mesh, report)
        part = data_partition(mesh)
        # The whole global array, gathered onto every process.
        mine = read_steps(data.train, part, STEPS)
        report["global_array"][name] = [
            np.asarray(multihost_utils.process_allgather(global_batch_array(b, mesh), tiled=True)).tolist()
            for b in mine
        ]
        # Payloads of different sizes per share: each reader gets its own first reader's batch, whole.
        sizes = share_dataset(SIZES).train
        stream = sizes(DataPartition(part.index, part.count)) if part.reader == 0 else None
        got, how = _until_end(stream, mesh)
        report["sizes"][name] = [[described(b) for b in got], how]
        # One share ends a step early: a global batch needs every share, so every process stops there.
        uneven = share_dataset(UNEVEN).train
        stream = uneven(DataPartition(part.index, part.count)) if part.reader == 0 else None
        got, how = _until_end(stream, mesh)
        report["uneven"][name] = [len(got), how]
        # Share 1's first reader fails while share 0's has batches: nobody waits for share 1's batch.
        healthy = iter([np.arange(4)] * 3)
        stream = (_Broken() if part.index == 1 else healthy) if part.reader == 0 else None
        got, how = _until_end(stream, mesh)
        report["one_failed"][name] = [len(got), how]
    (out / f"process-{process_id}.json").write_text(json.dumps(report))
    jax.distributed.shutdown()


if __name__ == "__main__":
    main(int(sys.argv[1]), int(sys.argv[2]), Path(sys.argv[3]))

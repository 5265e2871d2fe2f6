"""What the jax tests share: a tiny deterministic dataset and the mesh arrangements they read it under."""

from __future__ import annotations

from typing import Any

import numpy as np

from dew.data import DataPartition, Dataset, Loading, Reader
from dew.data.dataset import global_dataset

BATCH = 16
STEPS = 3
SERIAL = Loading(workers=0, threads=2, read_buffer=8)


def dataset() -> Dataset:
    """200 shuffled records of one int64 each, and a 2-batch validation pass."""
    return global_dataset(
        train=np.arange(200), val=np.arange(1000, 1032), batch=BATCH, seed=7, loading=SERIAL, val_batches=None
    )


def read_steps(reader: Reader, partition: DataPartition, steps: int) -> list[np.ndarray]:
    with reader(partition) as stream:
        return [np.asarray(next(stream)) for _ in range(steps)]


def meshes(devices: np.ndarray) -> dict[str, tuple[np.ndarray, tuple[str, ...]]]:
    """Mesh grids over 8 devices, given in (process, id) order: 2 processes of 4, or 1 of 8."""
    by_process = devices.reshape(2, 4)
    return {
        # Rows split over every device: each process holds a contiguous half of the rows.
        "data": (devices.reshape(8), ("data",)),
        # A sequence axis inside each process: its devices hold the same rows.
        "data_sequence": (by_process, ("data", "sequence")),
        # Pipeline stages across processes: both processes hold every row, so one share has two readers.
        "data_pipeline": (by_process.T, ("data", "pipeline")),
        # fsdp rows interleaved across processes: each process holds every other row block.
        "data_fsdp_interleaved": (by_process.T.reshape(2, 4), ("data", "fsdp")),
        # Rows over fsdp, a sequence split across processes: again one share, two readers.
        "fsdp_sequence_pipeline": (by_process.T.reshape(2, 2, 2).transpose(1, 2, 0), ("fsdp", "sequence", "pipeline")),
    }


def expected_global_array(batch: np.ndarray, sharding: Any, mesh: Any) -> np.ndarray:
    """The global array the shares make: share i's rows fill its row blocks in order (independent of dew)."""
    from dew.data.distributed import mesh_rows

    blocks = mesh_rows(mesh)
    per_block = len(batch) // blocks
    owners: dict[int, set[int]] = {}
    for device, index in sharding.devices_indices_map(batch.shape).items():
        owners.setdefault(device.process_index, set()).add((index[0].start or 0) // per_block)
    held = sorted({frozenset(b) for b in owners.values()}, key=min)
    out = np.empty_like(batch)
    for share, share_blocks in enumerate(held):
        rows = batch[share :: len(held)]
        for k, block in enumerate(sorted(share_blocks)):
            out[block * per_block : (block + 1) * per_block] = rows[k * per_block : (k + 1) * per_block]
    return out

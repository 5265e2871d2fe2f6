"""What the jax tests share: a tiny deterministic dataset and the mesh arrangements they read it under."""

from __future__ import annotations

import functools
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


def pair_meshes(devices: np.ndarray) -> dict[str, tuple[np.ndarray, tuple[str, ...]]]:
    """Mesh grids over 8 devices, given in (process, id) order, as 4 processes of 2: 2 shares of 2 readers."""
    by_process = devices.reshape(4, 2)
    return {
        # Rows over process pairs, pipeline stages within a pair: processes 0, 1 read share 0 and 2, 3 share 1.
        "data_pipeline_pairs": (by_process.reshape(2, 4), ("data", "pipeline")),
        # fsdp rows inside each process, a sequence split across the pair: each share is two row blocks.
        "data_sequence_fsdp_pairs": (by_process.reshape(2, 2, 2), ("data", "sequence", "fsdp")),
        # Pairs interleaved: processes 0, 2 read share 0 and 1, 3 share 1.
        "data_sequence_interleaved": (by_process[[0, 2, 1, 3]].reshape(2, 4), ("data", "sequence")),
        # The first rows on processes 3 and 1: share 0's first reader is process 1, share 1's is process 0.
        "data_pipeline_reversed": (by_process[[3, 1, 2, 0]].reshape(2, 4), ("data", "pipeline")),
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


def share_dataset(lengths: tuple[tuple[int, ...], ...]) -> Dataset:
    """Each share its own Grain pipeline of dict trees: share i's records at step s hold lengths[i][s]
    tokens, so the shares' first readers hand over payloads of different sizes, and a share with fewer
    steps ends before the others."""
    return Dataset.from_grain(functools.partial(_share_records, lengths), batch=4, loading=SERIAL)


def _share_records(lengths: tuple[tuple[int, ...], ...], partition: DataPartition) -> Any:
    import grain

    rows = partition.rows(4)
    records = [
        {
            "tokens": np.arange(length, dtype=np.int32) + 1000 * partition.index + 100 * step + row,
            "meta": {"step": np.int64(step), "share": f"share-{partition.index}"},
        }
        for step, length in enumerate(lengths[partition.index])
        for row in range(rows)
    ]
    return grain.MapDataset.source(records).to_iter_dataset()


def described(tree: Any) -> dict[str, list]:
    """A batch tree as JSON: every leaf's path, dtype, shape and values."""
    import jax

    leaves = jax.tree_util.tree_leaves_with_path(tree)
    return {jax.tree_util.keystr(path): [leaf.dtype.str, list(leaf.shape), leaf.tolist()] for path, leaf in leaves}

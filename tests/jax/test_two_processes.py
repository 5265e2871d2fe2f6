"""A real two-process jax cluster on 127.0.0.1: shares, global arrays, first readers, Orbax across counts."""

from __future__ import annotations

from pathlib import Path

import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dew.data import DataPartition
from dew.data.checkpoints import DataPositionRestore
from tests.jax import cluster
from tests.jax.cases import STEPS, dataset, read_steps

pytestmark = pytest.mark.jax

TIMEOUT = 240  # seconds for both processes together; jax starts slowly on a shared 2-core machine


@pytest.fixture(scope="module")
def cluster_run(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, list[dict]]:
    out = tmp_path_factory.mktemp("two_processes")
    return out, cluster.run("tests.jax.two_process", 2, out, timeout=TIMEOUT)


def test_each_process_reads_its_own_share(cluster_run: tuple[Path, list[dict]]) -> None:
    _, reports = cluster_run
    parts = [r["partitions"] for r in reports]
    assert parts[0]["data"] == [0, 2, 1, 0] and parts[1]["data"] == [1, 2, 1, 0]
    assert parts[0]["data_sequence"] == [0, 2, 1, 0] and parts[1]["data_sequence"] == [1, 2, 1, 0]
    assert parts[0]["data_fsdp_interleaved"] == [0, 2, 1, 0] and parts[1]["data_fsdp_interleaved"] == [1, 2, 1, 0]
    for name in ("data_pipeline", "fsdp_sequence_pipeline"):
        assert parts[0][name] == [0, 1, 2, 0] and parts[1][name] == [0, 1, 2, 1]


def test_first_reader_batch_equals_reading_everywhere(cluster_run: tuple[Path, list[dict]]) -> None:
    _, reports = cluster_run
    whole = read_steps(dataset().train, DataPartition(), STEPS)
    for name in ("data_pipeline", "fsdp_sequence_pipeline"):
        for report in reports:
            np.testing.assert_array_equal(np.array(report["first_reader"][name]), np.stack(whole))
    for name, steps in reports[0]["val_steps"].items():
        assert steps == 2 == reports[1]["val_steps"][name], name
    for name in ("data_pipeline", "fsdp_sequence_pipeline"):
        assert reports[0]["failure"][name] == "OSError: disk gone"
        assert (
            reports[1]["failure"][name] == "RuntimeError: the first reader of share 0 of 1 failed: OSError: disk gone"
        )


def test_orbax_save_on_two_processes_restores_on_one(cluster_run: tuple[Path, list[dict]], devices: list) -> None:
    out, reports = cluster_run
    assert reports[0]["saved"] == reports[1]["saved"]
    data = dataset()
    whole = read_steps(data.train, DataPartition(), 2 * STEPS)
    mesh = Mesh(np.array(devices), ("data",))
    target = {"w": jax.ShapeDtypeStruct((16,), np.float32, sharding=NamedSharding(mesh, PartitionSpec("data")))}
    with data.train(DataPartition()) as stream, ocp.CheckpointManager(out / "ckpt") as manager:
        restored = manager.restore(
            STEPS, args=ocp.args.Composite(state=ocp.args.StandardRestore(target), data=DataPositionRestore(stream))
        )
        assert restored["data"]["records"] == STEPS * 16
        tail = [np.asarray(next(stream)) for _ in range(STEPS)]
    for want, got in zip(whole[STEPS:], tail, strict=True):
        np.testing.assert_array_equal(got, want)
    # The model state came back too: step 3's global batch, grouped by share (process 0's rows, then 1's).
    last = whole[STEPS - 1]
    np.testing.assert_array_equal(np.asarray(restored["state"]["w"]), np.concatenate([last[0::2], last[1::2]]))

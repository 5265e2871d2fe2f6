"""Orbax checkpoints of the data position: exact resume on another share count, share states, refusals."""

from __future__ import annotations

import json
from pathlib import Path

import grain
import jax
import numpy as np
import orbax.checkpoint as ocp
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dew.data import DataPartition, Dataset
from dew.data.checkpoints import DataPositionHandler, DataPositionRestore, DataPositionSave, read_position
from dew.data.dataset import global_dataset
from tests.jax.cases import SERIAL
from tests.support import assert_batches_equal, interleave, read_global

pytestmark = pytest.mark.jax


def streams(reader, count: int) -> list:
    return [reader(DataPartition(index=i, count=count)) for i in range(count)]


@given(
    shares=st.sampled_from([1, 2, 4]),
    new_shares=st.sampled_from([1, 2, 3, 4]),
    stop_at=st.integers(0, 5),
    seed=st.integers(0, 1000),
)
@settings(max_examples=15, deadline=None)
def test_a_saved_position_resumes_exactly_on_another_share_count(
    tmp_path_factory: pytest.TempPathFactory, shares: int, new_shares: int, stop_at: int, seed: int
) -> None:
    data = global_dataset(train=np.arange(29), val=None, batch=12, seed=seed, loading=SERIAL, val_batches=None)
    full, _ = read_global(data.train, 1, 8)
    directory = tmp_path_factory.mktemp("position")
    before = streams(data.train, shares)
    head = [interleave([next(s) for s in before]) for _ in range(stop_at)]
    DataPositionHandler().save(directory, DataPositionSave(before[0]))
    for s in before:
        s.close()
    after = streams(data.train, new_shares)
    for s in after:
        assert DataPositionHandler().restore(directory, DataPositionRestore(s))["records"] == 12 * stop_at
    tail = [interleave([next(s) for s in after]) for _ in range(8 - stop_at)]
    for s in after:
        s.close()
    assert_batches_equal(full, head + tail)


def test_the_position_rides_beside_the_model_state(tmp_path: Path, devices: list) -> None:
    data = global_dataset(train=np.arange(40), val=None, batch=8, seed=3, loading=SERIAL, val_batches=None)
    mesh = Mesh(np.array(devices), ("data",))
    sharding = NamedSharding(mesh, PartitionSpec("data"))
    state = {"w": jax.device_put(np.arange(8, dtype=np.float32), sharding)}
    full, _ = read_global(data.train, 1, 6)
    options = ocp.CheckpointManagerOptions(enable_async_checkpointing=True)
    with data.train(DataPartition()) as stream, ocp.CheckpointManager(tmp_path, options=options) as manager:
        for _ in range(4):
            next(stream)
        manager.save(4, args=ocp.args.Composite(state=ocp.args.StandardSave(state), data=DataPositionSave(stream)))
        next(stream)  # reading on while the save commits does not move the saved position
        manager.wait_until_finished()
    assert json.loads((tmp_path / "4" / "data" / "position.json").read_text())["records"] == 32
    target = {"w": jax.ShapeDtypeStruct((8,), np.float32, sharding=sharding)}
    with data.train(DataPartition()) as stream, ocp.CheckpointManager(tmp_path) as manager:
        restored = manager.restore(
            manager.latest_step(),
            args=ocp.args.Composite(state=ocp.args.StandardRestore(target), data=DataPositionRestore(stream)),
        )
        tail = [next(stream) for _ in range(2)]
    np.testing.assert_array_equal(np.asarray(restored["state"]["w"]), np.arange(8))
    assert_batches_equal(full[4:], tail)


def share_dataset() -> Dataset:
    def build(partition: DataPartition) -> grain.IterDataset:
        return grain.MapDataset.source(np.arange(60))[partition.index :: partition.count].to_iter_dataset()

    return Dataset.from_grain(build, batch=4, loading=SERIAL)


def test_a_share_state_is_written_per_share_and_restores_only_there(tmp_path: Path) -> None:
    data = share_dataset()
    before = streams(data.train, 2)
    for s in before:
        for _ in range(3):
            next(s)
        DataPositionHandler().save(tmp_path, DataPositionSave(s))
    assert sorted(p.name for p in tmp_path.iterdir()) == ["share-0-of-2.json", "share-1-of-2.json"]
    for index, stream in enumerate(before):
        want = [next(stream) for _ in range(2)]
        stream.close()
        with data.train(DataPartition(index=index, count=2)) as again:
            DataPositionHandler().restore(tmp_path, DataPositionRestore(again))
            assert_batches_equal(want, [next(again) for _ in range(2)])
    with data.train(DataPartition(index=0, count=4)) as other, pytest.raises(ValueError, match="share 0 of 4"):
        DataPositionHandler().restore(tmp_path, DataPositionRestore(other))


def test_only_the_first_reader_of_a_share_writes_it(tmp_path: Path) -> None:
    data = share_dataset()
    with data.train(DataPartition(index=1, count=2, readers=2, reader=1)) as second:
        DataPositionHandler().save(tmp_path, DataPositionSave(second))
    assert list(tmp_path.iterdir()) == []


def test_the_primary_process_writes_a_global_position_once(tmp_path: Path) -> None:
    data = global_dataset(train=np.arange(30), val=None, batch=6, seed=0, loading=SERIAL, val_batches=None)
    with data.train(DataPartition()) as stream:
        DataPositionHandler(primary_host=1).save(tmp_path, DataPositionSave(stream))  # this is process 0
        assert list(tmp_path.iterdir()) == []
        with pytest.raises(ValueError, match="process 0 writes the data position"):
            DataPositionHandler().save(tmp_path, DataPositionSave(None))
    assert DataPositionHandler().restore(tmp_path, DataPositionRestore(None)) is None


class _NotDew:
    def get_state(self) -> dict:
        return {"step": 3}

    def set_state(self, state: dict) -> None:
        raise AssertionError("never restored")


class _FetchAsYouGo:
    """A stream with no position, as OnlineImages gives: what it yields depends on which fetches succeed."""

    def __next__(self) -> dict:
        return {}


def test_a_stream_without_a_position_is_refused_when_its_checkpoint_args_are_built() -> None:
    for args in (DataPositionSave, DataPositionRestore):
        with pytest.raises(TypeError, match=r"_FetchAsYouGo has no position .*checkpoint_every=None"):
            args(_FetchAsYouGo())


def test_bad_positions_are_refused_by_path(tmp_path: Path) -> None:
    with pytest.raises(ValueError, match="not a dew data position"):
        DataPositionHandler().save(tmp_path, DataPositionSave(_NotDew()))
    with pytest.raises(FileNotFoundError, match="holds no data position"):
        read_position(tmp_path)
    (tmp_path / "position.json").write_text("{not json")
    with pytest.raises(ValueError, match=r"position\.json is not valid JSON"):
        read_position(tmp_path)
    (tmp_path / "position.json").write_text(json.dumps({"kind": "dew.global/1", "records": 12, "reads": {"x": 1}}))
    data = global_dataset(train=np.arange(30), val=None, batch=6, seed=0, loading=SERIAL, val_batches=None)
    with data.train(DataPartition()) as stream, pytest.raises(ValueError):
        DataPositionHandler().restore(tmp_path, DataPositionRestore(stream))  # saved over another order

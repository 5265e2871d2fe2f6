"""Meshes over 8 CPU devices: shares from the mesh, global arrays, ramp checks, and the hand-off payload."""

from __future__ import annotations

import itertools

import jax
import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st
from jax.sharding import Mesh, PartitionSpec

from dew.data import DataPartition, Ramp, ramped
from dew.data import distributed as dist
from dew.data.dataset import global_dataset
from tests.jax.cases import SERIAL, meshes

pytestmark = pytest.mark.jax

AXES = ("data", "fsdp", "sequence", "pipeline", "tensor")


def simulated(mesh: Mesh, per_process: int, axes: tuple[str, ...] | None = None) -> dict[int, DataPartition]:
    """The shares of `mesh` if each `per_process` consecutive device ids were one process."""
    axes = dist.batch_axes_of(mesh, axes)
    return dist._partitions(dist._blocks_by_process(mesh, axes, lambda d: d.id // per_process))


def assemble(batch: np.ndarray, mesh: Mesh, axes: tuple[str, ...], process_of, parts) -> np.ndarray:
    """What make_array_from_process_local_data builds from each process's share (its documented rule:
    a process's unique slices, in order of their start, are consecutive pieces of its local data)."""
    sharding = dist.batch_sharding(mesh, axes)
    placement = sharding.devices_indices_map(batch.shape)
    out = np.full_like(batch, -1)
    for process, part in parts.items():
        local = batch[part.index :: part.count]
        starts = sorted({(idx[0].start or 0) for d, idx in placement.items() if process_of(d) == process})
        size = len(batch) // dist.mesh_rows(mesh, axes)
        for rank, start in enumerate(starts):
            piece = local[rank * size : (rank + 1) * size]
            already = out[start : start + size]
            assert (already == -1).all() or (already == piece).all(), "two readers of one block disagree"
            out[start : start + size] = piece
    return out


@st.composite
def mesh_layouts(draw):
    sizes = draw(st.sampled_from([(8,), (2, 4), (4, 2), (2, 2, 2), (1, 8), (2, 1, 4)]))
    names = draw(st.permutations(AXES))[: len(sizes)]
    order = draw(st.one_of(st.just(list(range(8))), st.permutations(range(8))))
    rows_axes = [a for a in names if draw(st.booleans())] or [names[0]]
    per_process = draw(st.sampled_from([1, 2, 4, 8]))
    return sizes, tuple(names), order, tuple(rows_axes), per_process


@given(layout=mesh_layouts(), rows=st.integers(1, 3))
@settings(max_examples=60, deadline=None)
def test_shares_assemble_the_global_batch_on_any_mesh(devices: list, layout, rows: int) -> None:
    sizes, names, order, axes, per_process = layout
    mesh = Mesh(np.array([devices[i] for i in order]).reshape(sizes), names)
    process_of = lambda d: d.id // per_process  # noqa: E731
    blocks = dist._blocks_by_process(mesh, axes, process_of)
    batch = np.arange(dist.mesh_rows(mesh, axes) * rows)
    try:
        parts = dist._partitions(blocks)
    except ValueError as refused:
        held = [frozenset(b) for b in blocks.values()]
        assert len({len(b) for b in held}) > 1 or any(a != b and a & b for a, b in itertools.product(held, held))
        assert "row blocks" in str(refused)
        return
    assert sorted(parts) == sorted(blocks)
    for process, part in parts.items():
        same = [p for p in parts if blocks[p] == blocks[process]]
        assert part.readers == len(same) and part.reader == sorted(same).index(process)
    global_array = assemble(batch, mesh, axes, process_of, parts)
    assert sorted(global_array.tolist()) == batch.tolist()  # every record once: a permutation of the batch


def test_named_arrangements_of_two_processes(devices: list) -> None:
    arrangements = meshes(np.array(devices))
    expected = {
        "data": {0: (0, 2, 1, 0), 1: (1, 2, 1, 0)},
        "data_sequence": {0: (0, 2, 1, 0), 1: (1, 2, 1, 0)},
        "data_fsdp_interleaved": {0: (0, 2, 1, 0), 1: (1, 2, 1, 0)},
        "data_pipeline": {0: (0, 1, 2, 0), 1: (0, 1, 2, 1)},
        "fsdp_sequence_pipeline": {0: (0, 1, 2, 0), 1: (0, 1, 2, 1)},
    }
    for name, (grid, axes) in arrangements.items():
        parts = simulated(Mesh(grid, axes), per_process=4)
        got = {p: (s.index, s.count, s.readers, s.reader) for p, s in parts.items()}
        assert got == expected[name], name


def test_four_processes_with_sequence_and_pipeline_axes(devices: list) -> None:
    grid = np.array(devices).reshape(2, 2, 2)  # processes of 2 devices: the last axis is inside a process
    parts = simulated(Mesh(grid, ("data", "pipeline", "sequence")), per_process=2)
    assert {p: (s.index, s.count, s.readers, s.reader) for p, s in parts.items()} == {
        0: (0, 2, 2, 0), 1: (0, 2, 2, 1), 2: (1, 2, 2, 0), 3: (1, 2, 2, 1)
    }  # fmt: skip
    parts = simulated(Mesh(grid, ("pipeline", "sequence", "fsdp")), per_process=2)
    assert {p: (s.index, s.count, s.readers) for p, s in parts.items()} == {p: (0, 1, 4) for p in range(4)}


@pytest.mark.parametrize("name", ["data", "data_sequence", "data_pipeline", "data_fsdp_interleaved"])
def test_one_process_reads_everything_and_places_it_whole(devices: list, name: str) -> None:
    grid, axes = meshes(np.array(devices))[name]
    mesh = Mesh(grid, axes)
    assert dist.data_partition(mesh) == DataPartition()
    batch = {"text": np.arange(32 * 3, dtype=np.int32).reshape(32, 3), "mask": np.ones(32, dtype=bool)}
    arrays = dist.global_batch_array(batch, mesh)
    for key, array in arrays.items():
        assert array.sharding.spec == PartitionSpec(dist.batch_axes_of(mesh))
        np.testing.assert_array_equal(np.asarray(array), batch[key])
        rows = 32 // dist.mesh_rows(mesh)
        assert {s.data.shape[0] for s in array.addressable_shards} == {rows}


def test_bad_batches_are_refused_by_leaf(devices: list) -> None:
    mesh = Mesh(np.array(devices), ("data",))
    with pytest.raises(ValueError, match=r"\['ids'\] has shape \(12,\).*8 rows"):
        dist.global_batch_array({"ids": np.arange(12)}, mesh)
    with pytest.raises(TypeError, match=r"\['prompt'\] has dtype \|S3"):
        dist.global_batch_array({"prompt": np.array([b"abc"] * 8)}, mesh)
    with pytest.raises(ValueError, match="batch_axes"):
        dist.data_partition(mesh, batch_axes=("fsdp",))
    with pytest.raises(ValueError, match="none of the default batch axes"):
        dist.data_partition(Mesh(np.array(devices), ("replica",)))


def test_every_ramp_stage_has_to_split_into_the_mesh_rows(devices: list) -> None:
    mesh = Mesh(np.array(devices).reshape(2, 2, 2), ("data", "fsdp", "sequence"))  # 4 rows
    data = global_dataset(train=np.arange(100), val=None, batch=16, seed=0, loading=SERIAL, val_batches=None)
    dist.check_ramp_fits_mesh(data, mesh)
    dist.check_ramp_fits_mesh(ramped(data, Ramp(start=4, increment=4, samples=64)), mesh)
    with pytest.raises(ValueError, match=r"ramp stage 1 \(from global record \d+\) reads a global batch of 10"):
        dist.check_ramp_fits_mesh(ramped(data, Ramp(start=4, increment=6, samples=64)), mesh)
    flat = global_dataset(train=np.arange(100), val=None, batch=6, seed=0, loading=SERIAL, val_batches=None)
    with pytest.raises(ValueError, match=r"global batch 6 does not split into the mesh's 4 rows \(data=2, fsdp=2\)"):
        dist.check_ramp_fits_mesh(flat, mesh)


def test_a_resumed_run_is_checked_only_from_the_ramp_stage_it_resumes_in(devices: list) -> None:
    mesh = Mesh(np.array(devices).reshape(2, 2, 2), ("data", "fsdp", "sequence"))  # 4 rows
    data = global_dataset(train=np.arange(100), val=None, batch=16, seed=0, loading=SERIAL, val_batches=None)
    grown = ramped(data, Ramp(start=2, increment=2, samples=64))  # stages of 2 … 14 records, then 16
    stream = grown.train(DataPartition())
    inside, past = None, None
    while past is None:
        next(stream)
        state = stream.get_state()
        stage = grown.ramp.stages(16)
        if state["records"] >= stage[-1].records:
            past = state
        elif state["records"] >= stage[1].records and inside is None:
            inside = state
    stream.close()
    dist.check_ramp_fits_mesh(grown, mesh, position=past)  # only batches of 16 are left to read
    with pytest.raises(ValueError, match=r"ramp stage \d+ .* reads a global batch of \d+"):
        dist.check_ramp_fits_mesh(grown, mesh, position=inside)
    with pytest.raises(ValueError, match=r"ramp stage 0 \(from global record 0\) reads a global batch of 2"):
        dist.check_ramp_fits_mesh(grown, mesh)


leaves = st.sampled_from(["<i8", "<u2", "|u1", "|b1", "<f2", "<f4", "<c8", "|S5", "<U3"]).flatmap(
    lambda dtype: st.lists(st.integers(0, 3), max_size=3).map(
        lambda shape: (np.arange(int(np.prod(shape)) if shape else 1) % 7).astype(dtype).reshape(shape)
    )
)
trees = st.recursive(
    leaves,
    lambda inner: st.one_of(
        st.dictionaries(st.text(max_size=4), inner, max_size=3),
        st.lists(inner, max_size=3),
        st.lists(inner, max_size=3).map(tuple),
    ),
    max_leaves=6,
)


@given(tree=trees)
@settings(max_examples=80, deadline=None)
def test_a_handed_batch_decodes_to_the_same_tree(tree) -> None:
    got = dist._decode(dist._BATCH, dist._encode(tree), DataPartition())
    assert jax.tree_util.tree_structure(got) == jax.tree_util.tree_structure(tree)
    for want, have in zip(jax.tree_util.tree_leaves(tree), jax.tree_util.tree_leaves(got), strict=True):
        assert have.dtype == want.dtype and have.shape == want.shape
        np.testing.assert_array_equal(have, want)


def test_the_hand_off_collective_and_its_signals(devices: list) -> None:
    layout = dist._Layout(partitions={0: DataPartition()}, devices={0: devices[0]})
    hand = dist._handoff(layout)
    payload = dist._encode({"x": np.arange(5000, dtype=np.int32)})  # more than one padded size
    status, received = hand((dist._BATCH, payload))
    assert status == dist._BATCH and received == payload
    assert hand((dist._END, b"")) == (dist._END, b"")
    with pytest.raises(StopIteration):
        dist._decode(dist._END, b"", DataPartition())
    with pytest.raises(RuntimeError, match="first reader of share 1 of 2 failed: OSError: gone"):
        dist._decode(dist._FAILED, b"OSError: gone", DataPartition(index=1, count=2))
    with pytest.raises(RuntimeError, match="first reader of share 1 of 2 failed, so the readers of share 0 stop"):
        dist._decode(dist._ELSEWHERE, b"1", DataPartition(index=0, count=2))
    with pytest.raises(TypeError, match="object array"):
        dist._encode({"x": np.array([object()])})


def test_one_reader_per_share_reads_its_own_stream(devices: list) -> None:
    mesh = Mesh(np.array(devices), ("data",))
    assert dist.first_reader_batch(iter([7, 8]), mesh) == 7
    with pytest.raises(ValueError, match="first reader of share 0 of 1: pass its iterator"):
        dist.first_reader_batch(None, mesh)

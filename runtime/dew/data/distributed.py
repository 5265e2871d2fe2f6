"""A JAX mesh as data shares: which share each process reads, handing a share between its readers, and
turning the shares into one global jax.Array.

The rows of a global batch are cut over the mesh's batch axes into `mesh_rows(mesh)` blocks, one per
position along those axes. A process needs the blocks its devices hold; processes needing the same
blocks read the same share, since the axes between them (a sequence split, pipeline stages, tensor
parallelism) hold the same rows. This module imports jax, so `dew.data` never imports it; use
`import dew.data.distributed`.
"""

from __future__ import annotations

import dataclasses
import functools
import json
from collections.abc import Callable, Iterator, Mapping, Sequence
from typing import TYPE_CHECKING, Any

import jax
import numpy as np
from jax.sharding import Mesh, NamedSharding, PartitionSpec

from dew.data import position as dewposition
from dew.data.partition import DataPartition

if TYPE_CHECKING:
    from dew.data.dataset import Dataset

# The mesh axes that split a batch's rows when the caller names none (MaxText's names for data and
# fully sharded data parallelism); every other axis holds the same rows on each of its positions.
BATCH_AXES = ("data", "fsdp")


def batch_axes_of(mesh: Mesh, batch_axes: Sequence[str] | None = None) -> tuple[str, ...]:
    """The mesh axes that split rows: `batch_axes` checked against the mesh, or BATCH_AXES it has."""
    if batch_axes is None:
        axes = tuple(a for a in mesh.axis_names if a in BATCH_AXES)
        if not axes:
            raise ValueError(
                f"the mesh has none of the default batch axes {BATCH_AXES} (its axes: {mesh.axis_names}); "
                "name the axes that split the batch with batch_axes="
            )
        return axes
    axes = (batch_axes,) if isinstance(batch_axes, str) else tuple(batch_axes)
    unknown = [a for a in axes if a not in mesh.axis_names]
    if unknown or len(set(axes)) != len(axes):
        raise ValueError(f"batch_axes {axes} must be distinct axes of the mesh, whose axes are {mesh.axis_names}")
    return axes


def mesh_rows(mesh: Mesh, batch_axes: Sequence[str] | None = None) -> int:
    """How many row blocks the batch axes cut a global batch into; every global batch is a multiple."""
    return int(np.prod([mesh.shape[a] for a in batch_axes_of(mesh, batch_axes)], dtype=np.int64))


def batch_sharding(mesh: Mesh, batch_axes: Sequence[str] | None = None) -> NamedSharding:
    """Rows split over the batch axes, every other dimension whole on each device."""
    return NamedSharding(mesh, PartitionSpec(batch_axes_of(mesh, batch_axes)))


@dataclasses.dataclass(frozen=True, eq=False)  # hashed by identity: _layout caches one per mesh
class _Layout:
    """Every process's share of a mesh, and the device each process hands batches through."""

    partitions: Mapping[int, DataPartition]
    devices: Mapping[int, Any]


def _blocks_by_process(mesh: Mesh, axes: tuple[str, ...], process_of: Callable[[Any], int]) -> dict[int, set[int]]:
    # Ask jax's own sharding where each block lives, so the blocks mean what make_array_from_process_local_data
    # means by them, whatever the device order in the mesh.
    rows = mesh_rows(mesh, axes)
    placement = NamedSharding(mesh, PartitionSpec(axes)).devices_indices_map((rows,))
    blocks: dict[int, set[int]] = {}
    for device, index in placement.items():
        blocks.setdefault(process_of(device), set()).add(index[0].start or 0)
    return blocks


def _partitions(blocks: Mapping[int, set[int]]) -> dict[int, DataPartition]:
    """Processes holding the same row blocks share a share; shares are numbered by their first block."""
    groups: dict[frozenset[int], list[int]] = {}
    for process in sorted(blocks):
        groups.setdefault(frozenset(blocks[process]), []).append(process)
    sizes = {len(b) for b in groups}
    total = sum(len(b) for b in groups)
    if len(sizes) > 1 or len(frozenset().union(*groups)) != total:
        held = {processes[0]: sorted(b) for b, processes in groups.items()}
        raise ValueError(
            "the mesh does not cut the batch into equal, disjoint shares per process: processes hold the row "
            f"blocks {held}. Arrange the devices so that each process's devices hold the same number of row "
            "blocks and two processes hold either the same blocks or none in common."
        )
    ordered = sorted(groups, key=min)
    return {
        process: DataPartition(index=index, count=len(ordered), readers=len(groups[b]), reader=reader)
        for index, b in enumerate(ordered)
        for reader, process in enumerate(groups[b])
    }


@functools.lru_cache(maxsize=32)
def _layout(mesh: Mesh, axes: tuple[str, ...]) -> _Layout:
    partitions = _partitions(_blocks_by_process(mesh, axes, lambda d: d.process_index))
    devices: dict[int, Any] = {}
    for device in sorted(mesh.devices.flat, key=lambda d: d.id):
        devices.setdefault(device.process_index, device)
    return _Layout(partitions, devices)


def data_partition(mesh: Mesh, batch_axes: Sequence[str] | None = None) -> DataPartition:
    """The share of every global batch this process reads, given the mesh the batch is sharded over.

    `index`/`count` number the distinct sets of row blocks that processes' devices hold, in row order;
    `readers` is how many processes hold this share's blocks and `reader` this process's rank among them.
    Every process computes the whole layout alike, so the shares agree without communication.
    """
    axes = batch_axes_of(mesh, batch_axes)
    layout = _layout(mesh, axes)
    process = jax.process_index()
    if process not in layout.partitions:
        raise ValueError(f"process {process} holds no device of the mesh, so it reads no share of its batches")
    return layout.partitions[process]


def check_ramp_fits_mesh(
    dataset: Dataset,
    mesh: Mesh,
    batch_axes: Sequence[str] | None = None,
    *,
    position: Mapping[str, Any] | None = None,
) -> None:
    """Refuses, before the run starts, a global batch or ramp stage that does not split into the mesh's rows.

    A ramp grows the batch while the mesh stays fixed, so every stage, not only the final batch, has to
    give each row block the same whole number of records. A run resumed from `position` (a saved data
    position) is checked from the stage it resumes in: stages it has finished are not read again.
    """
    axes = batch_axes_of(mesh, batch_axes)
    rows = mesh_rows(mesh, axes)
    shape = ", ".join(f"{a}={mesh.shape[a]}" for a in axes)
    if dataset.ramp is None:
        if dataset.batch % rows:
            raise ValueError(
                f"the global batch {dataset.batch} does not split into the mesh's {rows} rows ({shape}); "
                f"use a multiple of {rows}"
            )
        return
    stages = dataset.ramp.stages(dataset.batch)
    records = _records_read(position)
    for number, stage in enumerate(stages):
        if number + 1 < len(stages) and stages[number + 1].records <= records:
            continue  # finished before the position
        if stage.batch % rows:
            raise ValueError(
                f"ramp stage {number} (from global record {stage.records}) reads a global batch of {stage.batch}, "
                f"which does not split into the mesh's {rows} rows ({shape}); make the ramp's start and "
                f"increment multiples of {rows}"
            )


def _records_read(saved: Mapping[str, Any] | None) -> int:
    """The global records a saved position has read; 0 for none, or for one a share keeps of its own."""
    if saved is None:
        return 0
    parsed = dewposition.parse(saved)
    return parsed.records if isinstance(parsed, dewposition.GlobalPosition) else 0


def global_batch_array(batch: Any, mesh: Mesh, batch_axes: Sequence[str] | None = None) -> Any:
    """This process's share of a batch (a tree of arrays) as global jax.Arrays sharded over the batch axes.

    Every process calls this with its own share, the one `data_partition` names. Share i's rows fill the
    row blocks its processes' devices hold, in order, so a global array holds the records of the global
    batch grouped by share rather than in the stream's interleaved order; a step's loss over the rows is
    the same either way.
    """
    axes = batch_axes_of(mesh, batch_axes)
    sharding = batch_sharding(mesh, axes)
    count = _layout(mesh, axes).partitions[jax.process_index()].count
    rows = mesh_rows(mesh, axes)

    def place(path: Any, leaf: Any) -> jax.Array:
        local = np.asarray(leaf)
        name = jax.tree_util.keystr(path) or "the batch"
        if local.dtype.kind in "OSUV":
            raise TypeError(f"{name} has dtype {local.dtype}, which a jax.Array cannot hold; keep it out of the batch")
        if local.ndim == 0 or (local.shape[0] * count) % rows:
            raise ValueError(
                f"{name} has shape {local.shape}: a share's leading dimension times the {count} shares has to "
                f"split into the mesh's {rows} rows"
            )
        return jax.make_array_from_process_local_data(sharding, local, (local.shape[0] * count, *local.shape[1:]))

    return jax.tree_util.tree_map_with_path(place, batch)


def first_reader_batch(batches: Iterator[Any] | None, mesh: Mesh, batch_axes: Sequence[str] | None = None) -> Any:
    """The next batch of this process's share, read by the share's first reader alone and handed to the rest.

    Every process of the mesh calls this once a step, together. On the first reader (`reader == 0`)
    `batches` is the share's iterator; on the others it is not touched and may be None. A global batch
    needs every share, so the mesh stops at the step where any share stops: when a first reader's
    iterator ends, every process of the mesh gets StopIteration (a first reader whose share still had a
    batch drops it); when one fails, the others get a RuntimeError naming the failed share instead of
    waiting for a batch that will not come. With one reader per share this is `next(batches)` and nothing
    is sent, so shares that end at different steps are the caller's to line up.
    """
    axes = batch_axes_of(mesh, batch_axes)
    layout = _layout(mesh, axes)
    me = layout.partitions[jax.process_index()]
    if all(p.readers == 1 for p in layout.partitions.values()):
        return next(_required(batches, me))
    hand = _handoff(layout)
    if me.reader != 0:
        return _decode(*hand(None), me)
    try:
        batch = next(_required(batches, me))
        payload = _encode(batch)  # inside the try: a batch that cannot be sent must not leave the others waiting
    except StopIteration:
        hand((_END, b""))
        raise
    except Exception as failure:
        hand((_FAILED, f"{type(failure).__name__}: {failure}".encode()))
        raise
    status, received = hand((_BATCH, payload))
    if status != _BATCH:  # another share ended or failed at this step
        _decode(status, received, me)
    return batch


def _required(batches: Iterator[Any] | None, me: DataPartition) -> Iterator[Any]:
    if batches is None:
        raise ValueError(f"this process is the first reader of share {me.index} of {me.count}: pass its iterator")
    return batches


# What the first reader sends ahead of the payload, so the others know what follows. _ELSEWHERE is never
# sent: it is what a share with a batch gets when another share's first reader failed at that step.
_BATCH, _END, _FAILED, _ELSEWHERE = 0, 1, 2, 3


def _encode(batch: Any) -> bytes:
    """A batch as one buffer: a JSON description of its tree and leaves, then the leaves' raw bytes."""
    leaves: list[np.ndarray] = []

    def describe(node: Any, where: str) -> Any:
        if isinstance(node, Mapping):
            for key in node:
                if not isinstance(key, str):
                    raise TypeError(f"{where} has the key {key!r}; a batch handed between readers has str keys")
            return {"dict": [[k, describe(v, f"{where}[{k!r}]")] for k, v in node.items()]}
        if isinstance(node, list | tuple):
            kind = "list" if isinstance(node, list) else "tuple"
            return {kind: [describe(v, f"{where}[{i}]") for i, v in enumerate(node)]}
        leaf = np.asarray(node)  # tobytes() writes C order whatever the layout; 0-d stays 0-d
        if leaf.dtype.hasobject:
            raise TypeError(f"{where} is an object array, which has no bytes to hand over; give it a fixed dtype")
        leaves.append(leaf)
        return {"array": [leaf.dtype.str, list(leaf.shape)]}

    head = json.dumps(describe(batch, "batch")).encode()
    return len(head).to_bytes(8, "little") + head + b"".join(leaf.tobytes() for leaf in leaves)


def _decode(status: int, payload: bytes, me: DataPartition) -> Any:
    if status == _END:
        raise StopIteration
    if status == _FAILED:
        raise RuntimeError(f"the first reader of share {me.index} of {me.count} failed: {payload.decode()}")
    if status == _ELSEWHERE:
        raise RuntimeError(
            f"the first reader of share {payload.decode()} of {me.count} failed, so the readers of share "
            f"{me.index} stop at the same step (the processes of share {payload.decode()} say why)"
        )
    size = int.from_bytes(payload[:8], "little")
    tree, offset = json.loads(payload[8 : 8 + size]), 8 + size

    def build(node: Mapping[str, Any]) -> Any:
        nonlocal offset
        ((kind, body),) = node.items()
        if kind == "dict":
            return {k: build(v) for k, v in body}
        if kind in ("list", "tuple"):
            items = [build(v) for v in body]
            return items if kind == "list" else tuple(items)
        dtype, shape = np.dtype(body[0]), tuple(body[1])
        nbytes = dtype.itemsize * int(np.prod(shape, dtype=np.int64))
        leaf = np.frombuffer(bytearray(payload[offset : offset + nbytes]), dtype=dtype)
        offset += nbytes
        return leaf.reshape(shape)

    return build(tree)


@functools.lru_cache(maxsize=8)
def _handoff(layout: _Layout) -> Callable[[tuple[int, bytes] | None], tuple[int, bytes]]:
    """Sends (status, payload) from every share's first reader to its other readers.

    One device per process is placed in a [share, reader] mesh and an all-gather over the reader axis
    runs on the accelerators' own interconnect, so a batch never travels through the coordinator. Each
    exchange is two collectives: a header, then the payload padded to a power of two so that a run
    compiles a handful of sizes rather than one per batch. Every process of the mesh runs one program,
    so the header also carries the largest payload of any share: all shares then send that size, even
    when one share's stream has ended or its batches are smaller. It carries the worst status of any
    share too, so that a share ending or failing stops every share at that step rather than leaving the
    others waiting in the next step's collectives for processes that have stopped.
    """
    counts = {p.count for p in layout.partitions.values()}
    readers = {p.readers for p in layout.partitions.values()}
    if len(readers) != 1:
        raise ValueError(
            f"shares of this mesh have different reader counts {sorted(readers)}; first_reader_batch "
            "needs every share read by as many processes"
        )
    (count,), (per_share,) = counts, readers
    grid = np.empty((count, per_share), dtype=object)
    for process, part in layout.partitions.items():
        grid[part.index, part.reader] = layout.devices[process]
    hand_mesh = Mesh(grid, ("share", "reader"))
    spec = PartitionSpec("share", "reader")
    sharding = NamedSharding(hand_mesh, spec)
    device = layout.devices[jax.process_index()]

    def first(local: jax.Array) -> jax.Array:
        return jax.lax.all_gather(local, "reader", axis=1, tiled=True)[:, :1]

    def header(local: jax.Array) -> jax.Array:
        mine = first(local)  # [1, 1, (status, size)]
        everyone = ("share", "reader")
        worst = mine[..., :1] * count + jax.lax.axis_index("share")  # the status, then which share
        return jax.numpy.concatenate([mine, jax.lax.pmax(mine[..., 1:], everyone), jax.lax.pmax(worst, everyone)], -1)

    on_mesh = functools.partial(jax.shard_map, mesh=hand_mesh, in_specs=spec, out_specs=spec)
    header_of, payload_of = jax.jit(on_mesh(header)), jax.jit(on_mesh(first))

    def exchange(fn: Callable[[jax.Array], jax.Array], local: np.ndarray) -> np.ndarray:
        shape = (count, per_share, *local.shape)
        array = jax.make_array_from_single_device_arrays(shape, sharding, [jax.device_put(local[None, None], device)])
        return np.asarray(fn(array).addressable_shards[0].data)[0, 0]

    def hand(message: tuple[int, bytes] | None) -> tuple[int, bytes]:
        status, payload = message if message is not None else (_BATCH, b"")
        if len(payload) >= _MAX_PAYLOAD:
            raise ValueError(f"a batch of {len(payload)} bytes is too large to hand over; split it into smaller steps")
        header = exchange(header_of, np.array([status, len(payload)], np.int32))
        status, size, largest, worst = (int(v) for v in header)
        received = b""
        if largest:  # sent as 32-bit words: XLA's CPU collectives move them about twice as fast as bytes
            received = exchange(payload_of, _padded(payload, largest).view(np.uint32)).tobytes()[:size]
        stopped, share = divmod(worst, count)
        if status == _BATCH and stopped == _END:
            return _END, b""
        if status == _BATCH and stopped == _FAILED:
            return _ELSEWHERE, str(share).encode()
        return status, received

    return hand


# The header counts bytes in int32, jax's default integer width.
_MAX_PAYLOAD = 1 << 31


def _padded(payload: bytes, size: int) -> np.ndarray:
    buffer = np.zeros(max(1024, 1 << (size - 1).bit_length()), dtype=np.uint8)
    buffer[: len(payload)] = np.frombuffer(payload, dtype=np.uint8)
    return buffer

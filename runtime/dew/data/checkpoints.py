"""Orbax integration: a data iterator's position saved beside the model state, as JSON.

    import orbax.checkpoint as ocp
    from dew.data.checkpoints import DataPositionRestore, DataPositionSave

    save = ocp.args.Composite(state=ocp.args.StandardSave(state), data=DataPositionSave(it))
    manager.save(step, args=save)
    restore = ocp.args.Composite(state=ocp.args.StandardRestore(abstract), data=DataPositionRestore(it))
    manager.restore(step, args=restore)

A global position (a record count over a global order, dew.data.position) is the same on every process,
so the primary process writes it once as `position.json` and any process count whose shares divide the
batch restores it. A share position (one share's own Grain state) is written by that share's first
reader as `share-<index>-of-<count>.json` and restores only into a reader of that same share. This
module imports orbax and jax, so `dew.data` never imports it.
"""

from __future__ import annotations

import dataclasses
import json
import re
from typing import Any

import jax
import orbax.checkpoint as ocp
from etils import epath

from dew.data import position
from dew.data.dataset import Checkpointable
from dew.data.partition import DataPartition

GLOBAL_FILE = "position.json"
_SHARE_FILE = re.compile(r"share-(\d+)-of-(\d+)\.json")


def _share_file(index: int, count: int) -> str:
    return f"share-{index}-of-{count}.json"


def _partition_of(iterator: Any) -> DataPartition | None:
    partition = getattr(iterator, "partition", None)
    return partition if isinstance(partition, DataPartition) else None


class DataPositionHandler(ocp.handlers.AsyncCheckpointHandler):
    """Writes and reads a data iterator's position; registered with orbax for DataPositionSave/Restore.

    The position is read from the iterator when the save is called, so a step taken while an async save
    is still writing cannot change what it writes. A process whose `DataPositionSave` holds None (a reader
    that takes its batches from the share's first reader) writes nothing and restores nothing.
    """

    def __init__(self, *, primary_host: int = 0) -> None:
        self._primary_host = primary_host

    def _writes(self, args: DataPositionSave) -> tuple[str, str] | None:
        """(file name, JSON text) this process writes, or None when another process writes its position."""
        if args.iterator is None:
            if jax.process_index() == self._primary_host:
                raise ValueError(
                    f"process {self._primary_host} writes the data position, but its DataPositionSave holds no "
                    "iterator; give the primary process its share's iterator"
                )
            return None
        state = args.iterator.get_state()
        saved = position.parse(state)  # refuses a state that is no dew position before anything is written
        text = json.dumps(state, indent=1, sort_keys=True)
        if isinstance(saved, position.GlobalPosition):
            return (GLOBAL_FILE, text) if jax.process_index() == self._primary_host else None
        partition = _partition_of(args.iterator)
        if partition is not None and partition.reader != 0:
            return None
        return _share_file(saved.index, saved.count), text

    async def async_save(self, directory: epath.Path, args: DataPositionSave) -> list[ocp.future.Future] | None:
        writes = self._writes(args)
        if writes is None:
            return None
        name, text = writes

        async def write() -> None:
            (epath.Path(directory) / name).write_text(text)

        return [ocp.future.CommitFutureAwaitingContractedSignals(write(), name="dew_data_position_save")]

    def save(self, directory: epath.Path, args: DataPositionSave) -> None:
        writes = self._writes(args)
        if writes is not None:
            name, text = writes
            (epath.Path(directory) / name).write_text(text)

    def restore(self, directory: epath.Path, args: DataPositionRestore | None = None) -> position.Position | None:
        """Sets the saved position on args.iterator and returns it (None when the iterator is None)."""
        if args is None or args.iterator is None:
            return None
        state = read_position(directory, _partition_of(args.iterator))
        args.iterator.set_state(state)
        return state

    def metadata(self, directory: epath.Path) -> None:
        return None

    def finalize(self, directory: epath.Path) -> None:
        pass

    def close(self) -> None:
        pass


def read_position(directory: epath.PathLike, partition: DataPartition | None = None) -> position.Position:
    """The data position saved under `directory`: the global one, or the share `partition` names."""
    directory = epath.Path(directory)
    path = directory / GLOBAL_FILE
    if path.exists():
        return _load(path)
    shares = sorted(p.name for p in directory.glob("share-*-of-*.json") if _SHARE_FILE.fullmatch(p.name))
    if not shares:
        raise FileNotFoundError(f"{directory} holds no data position ({GLOBAL_FILE} or share-<i>-of-<n>.json)")
    if partition is None:
        raise ValueError(
            f"{directory} holds the positions of separate shares ({', '.join(shares)}); only a reader of one "
            "of them can restore, and this iterator names no partition"
        )
    name = _share_file(partition.index, partition.count)
    if name not in shares:
        raise ValueError(
            f"{directory} holds the positions of shares {', '.join(shares)}, saved by a stream that keeps each "
            f"share's own state; this reader is share {partition.index} of {partition.count}, so it cannot "
            "resume there. Resume on the same share count, or use a stream whose position is global"
        )
    return _load(directory / name)


def _load(path: epath.Path) -> position.Position:
    try:
        state = json.loads(path.read_text())
    except json.JSONDecodeError as error:
        raise ValueError(f"{path} is not valid JSON: {error}") from None
    position.parse(state)
    return state


def _check_checkpointable(iterator: Any) -> None:
    """Refuses, by its type, a stream that cannot say where it stopped, before orbax starts writing.

    Without this the save fails inside orbax's writer thread on a missing get_state, far from the call
    that asked for it.
    """
    if iterator is not None and not isinstance(iterator, Checkpointable):
        raise TypeError(
            f"{type(iterator).__name__} has no position (no get_state/set_state): what it yields cannot be "
            "read again, so a checkpoint could not resume it; train over it with checkpoint_every=None"
        )


@ocp.args.register_with_handler(DataPositionHandler, for_save=True)
@dataclasses.dataclass
class DataPositionSave(ocp.args.CheckpointArgs):
    """Saves `iterator`'s position (get_state) as JSON; None on a process that holds no iterator."""

    iterator: Checkpointable | None

    def __post_init__(self) -> None:
        _check_checkpointable(self.iterator)


@ocp.args.register_with_handler(DataPositionHandler, for_restore=True)
@dataclasses.dataclass
class DataPositionRestore(ocp.args.CheckpointArgs):
    """Puts `iterator` back at the saved position (set_state); None on a process that holds no iterator."""

    iterator: Checkpointable | None

    def __post_init__(self) -> None:
        _check_checkpointable(self.iterator)

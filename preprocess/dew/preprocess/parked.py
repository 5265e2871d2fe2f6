"""Records parked in files by the step that made them, so that only where they are crosses the shuffle.

A step whose records are large (decoded video clips: hundreds of KB to MB each) writes them once into a
file of its own under the output's temporary directory and hands on a `Parked` reference (path, offset,
size) instead of the bytes. Beam then moves a few dozen bytes a record between processes, and the shard
writer (dew.preprocess.shards, which takes a Parked wherever it takes a record's bytes) reads each
record straight from its file into the shard in key order. The bytes never pass through the runner: on
DirectRunner they were encoded, sent to the runner process and back at every stage boundary, which cost
as much as decoding them.

A file is named uniquely per attempt, so a retried bundle never writes over the file another attempt
handed on; files of failed attempts are removed with the temporary directory when the corpus commits.
"""

from __future__ import annotations

import dataclasses
from typing import Any

from apache_beam.io.filesystems import FileSystems

from dew.preprocess import files


@dataclasses.dataclass(frozen=True)
class Parked:
    """A record of `size` bytes at `offset` in the file at `path`."""

    path: str
    offset: int
    size: int


class ParkingFile:
    """Appends records to one new file in `output`'s temporary directory, created on the first record.

    `discard()` removes what was written (the records are not to be used); `close()` ends the file,
    after which the Parked references add() returned can be handed on.
    """

    def __init__(self, output: str, name: str) -> None:
        self.output, self.name = output, name
        self.path: str | None = None
        self._file: Any = None
        self._offset = 0

    def add(self, record: bytes) -> Parked:
        if self._file is None:
            self.path = files.temp_name(self.output, self.name)
            self._file = FileSystems.create(self.path)
        self._file.write(record)
        assert self.path is not None, "an open file was opened at self.path"
        parked = Parked(self.path, self._offset, len(record))
        self._offset += len(record)
        return parked

    def close(self) -> None:
        if self._file is not None:
            self._file.close()
            self._file = None

    def discard(self) -> None:
        self.close()
        if self.path is not None:
            files.delete([self.path])
            self.path = None

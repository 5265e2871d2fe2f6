"""HFDatasetSource: a Hugging Face datasets.Dataset read by index, whose pickle never holds the table."""

from __future__ import annotations

import shutil
import tempfile
import threading
import weakref
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hooks import Hooked, Preprocess, collate_columns, collate_rows


class HFDatasetSource:
    """Reads a datasets.Dataset by index: `len`, `source[i]`, and whole batches through `read_batch`.

    Name a dataset (`name`, `split`, `options`) and load_dataset resolves it on the first record, or
    hand over a loaded `dataset`. Grain worker processes receive the source by pickle and the table
    never travels in it: a named dataset loads again from its name inside the worker (a cache hit after
    the first), one whose table already lives in Arrow files travels as those files' paths, and one
    held in memory is written out once with save_to_disk and reopened from there by every worker.

    Args:
        name: A hub dataset id or a local path that load_dataset reads; None when `dataset` is given.
        split: The split of a named dataset, slices such as "train[:10%]" included.
        dataset: A loaded datasets.Dataset (one split); None when `name` is given.
        options: load_dataset's other arguments; by default none.
        preprocess: A hook every record goes through before it is returned.

    Examples:
        >>> import pickle
        >>> import datasets
        >>> from dew.data import HFDatasetSource
        >>> source = HFDatasetSource(dataset=datasets.Dataset.from_dict({"text": ["a", "b", "c"]}))
        >>> len(source), source[1]
        (3, {'text': 'b'})
        >>> pickle.loads(pickle.dumps(source))[2]  # a worker's copy reopens the table written out
        {'text': 'c'}
    """

    def __init__(
        self,
        name: str | None = None,
        split: str = "train",
        dataset: Any = None,
        options: HFOptions | None = None,
        *,
        preprocess: Preprocess | None = None,
    ) -> None:
        if (name is None) == (dataset is None):
            raise ValueError("HFDatasetSource reads a named dataset (name=) or a loaded one (dataset=): give one")
        if dataset is not None:
            import datasets

            if isinstance(dataset, datasets.DatasetDict):
                raise TypeError(f"dataset= is one split, got a DatasetDict of {', '.join(dataset)}; pick one")
            if isinstance(dataset, datasets.IterableDataset):
                raise TypeError("an IterableDataset is read as it comes, not by index: use HubDataset(streaming=True)")
            if not isinstance(dataset, datasets.Dataset):
                raise TypeError(f"dataset= is a datasets.Dataset, got {type(dataset).__name__}")
        if options is not None and not isinstance(options, HFOptions):
            raise TypeError(f"HFDatasetSource options are HFOptions, got {type(options).__name__}")
        self.name, self.split, self.options = name, split, options or HFOptions()
        self.preprocess = preprocess
        self._dataset = dataset
        self._saved: str | None = None  # where an in-memory table was written for the workers
        self._fingerprint = None if dataset is None else dataset._fingerprint
        self._hooked = None if preprocess is None else Hooked(preprocess, self.label)
        self._lock = threading.Lock()

    @property
    def label(self) -> str:
        if self.name is None:
            return f"the dataset handed over as split {self.split!r}"
        config = "" if self.options.config is None else f" config {self.options.config!r}"
        return f"hf {self.name!r}{config} split {self.split!r}"

    def table(self) -> Any:
        """The datasets.Dataset, loaded (once per process) on first use."""
        if self._dataset is None:
            with self._lock:
                if self._dataset is None:
                    if self._saved is not None:
                        import datasets

                        self._dataset = datasets.load_from_disk(self._saved)
                    else:
                        assert self.name is not None, "a source not handed a dataset was named"
                        self._dataset = self.options.load(self.name, self.split, streaming=False)
        return self._dataset

    def __len__(self) -> int:
        return len(self.table())

    def __getitem__(self, index: int) -> dict[str, Any]:
        return self.rows([index])[0]

    def __getitems__(self, indices: Sequence[int]) -> list[dict[str, Any]]:
        return self.rows(indices)

    def rows(self, indices: Sequence[int] | np.ndarray) -> list[dict[str, Any]]:
        """The records at `indices` as dicts, after the preprocess hook."""
        indices = self._check([int(i) for i in indices])
        columns = self.table()[indices]
        rows = [dict(zip(columns, values, strict=True)) for values in zip(*columns.values(), strict=True)]
        return rows if self._hooked is None else self._hooked.apply(rows, indices)

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        """The batch of `indices` in one Arrow take; rows are built only when a hook has to see them."""
        checked = self._check([int(i) for i in indices])
        if self._hooked is not None:
            return collate_rows(self.rows(checked), self.label, checked)
        return collate_columns(self.table()[checked], self.label, checked)

    def _check(self, indices: list[int]) -> list[int]:
        size = len(self.table())
        bad = [i for i in indices if not 0 <= i < size]
        if bad:
            raise IndexError(f"record {bad[0]} is outside {self.label}, which holds {size} records")
        return indices

    def describe(self) -> dict[str, Any]:
        """What this source reads, by content: a changed table changes its fingerprint."""
        table = self.table()
        return {
            "hf": self.name,
            "config": self.options.config,
            "split": self.split,
            "records": len(table),
            "fingerprint": self._fingerprint or table._fingerprint,
            "preprocess": None if self.preprocess is None else str(self.preprocess),
        }

    def __getstate__(self) -> dict[str, Any]:
        state = {
            "name": self.name,
            "split": self.split,
            "options": self.options,
            "preprocess": self.preprocess,
            "fingerprint": self._fingerprint,
            "saved": self._saved,
            "dataset": None,
        }
        if self.name is None and self._saved is None:
            if _file_backed(self._dataset):
                state["dataset"] = self._dataset  # datasets pickles a file-backed table as its paths
            else:
                state["saved"] = self._write_out()
        return state

    def __setstate__(self, state: dict[str, Any]) -> None:
        self.name, self.split, self.options = state["name"], state["split"], state["options"]
        self.preprocess, self._fingerprint, self._saved = state["preprocess"], state["fingerprint"], state["saved"]
        self._dataset = state["dataset"]
        self._hooked = None if self.preprocess is None else Hooked(self.preprocess, self.label)
        self._lock = threading.Lock()

    def _write_out(self) -> str:
        with self._lock:
            if self._saved is None:
                directory = tempfile.mkdtemp(prefix="dew-hf-")
                self._dataset.save_to_disk(directory)
                # The copy lives as long as this source does in the process that wrote it.
                weakref.finalize(self, shutil.rmtree, directory, ignore_errors=True)
                self._saved = directory
        return self._saved


def _file_backed(dataset: Any) -> bool:
    """Whether every block of the table (and of its index mapping) is a memory-mapped Arrow file."""
    from datasets.table import ConcatenationTable, MemoryMappedTable

    def mapped(table: Any) -> bool:
        if isinstance(table, MemoryMappedTable):
            return True
        if isinstance(table, ConcatenationTable):
            return all(mapped(block) for row in table.blocks for block in row)
        return False

    indices = dataset._indices
    return mapped(dataset.data) and (indices is None or mapped(indices))

"""The preprocess hook both providers run on every record, and what a source they read looks like.

A hook is a function from one record (a dict of columns) to the record the batch holds. A spec keeps
it by its import name, "package.module:function", because a run's config names its data completely and
a worker process has to find the same function; a module-level function handed over directly is stored
under that name, while a lambda or closure works but has no config.
"""

from __future__ import annotations

import importlib
from collections.abc import Callable, Iterable, Mapping, Sequence
from typing import Any

import numpy as np

from dew.data.records import collate

Hook = Callable[[dict[str, Any]], Mapping[str, Any]]
Preprocess = Hook | str


def hook_name(function: Any) -> Any:
    """The "module:qualname" of a function importable by that name, else the function itself."""
    if isinstance(function, str):
        resolve(function)  # refuse a bad name when the spec is built, not in a worker
        return function
    if not callable(function):
        raise TypeError(f"preprocess is a function or its 'module:function' name, got {function!r}")
    module, qualname = getattr(function, "__module__", None), getattr(function, "__qualname__", "")
    if not module or "<" in qualname or module == "__main__":
        return function
    name = f"{module}:{qualname}"
    try:
        found = resolve(name)
    except (ImportError, AttributeError, ValueError):
        return function
    return name if found is function else function


def resolve(name: str | Hook) -> Hook:
    """The function a hook name names."""
    if not isinstance(name, str):
        return name
    module, sep, qualname = name.partition(":")
    if not sep or not module or not qualname:
        raise ValueError(f"preprocess name {name!r} is not of the form 'package.module:function'")
    target: Any = importlib.import_module(module)
    for part in qualname.split("."):
        try:
            target = getattr(target, part)
        except AttributeError:
            raise AttributeError(f"preprocess {name!r}: module {module!r} has no {qualname!r}") from None
    if not callable(target):
        raise TypeError(f"preprocess {name!r} names {type(target).__name__}, not a function")
    return target


def label(hook: Preprocess) -> str:
    return hook if isinstance(hook, str) else getattr(hook, "__qualname__", repr(hook))


class Hooked:
    """Runs a hook over the records another source reads, naming the record and column a failure hit.

    `rows(indices)` of the wrapped source gives one dict per index; the batch is collated only after
    the hook, so a hook may add, drop or reshape columns freely.
    """

    def __init__(self, hook: Preprocess, where: str) -> None:
        self.hook, self.where = hook, where
        self._function: Hook | None = None

    def __getstate__(self) -> dict[str, Any]:
        return {"hook": self.hook, "where": self.where}

    def __setstate__(self, state: dict[str, Any]) -> None:
        type(self).__init__(self, state["hook"], state["where"])

    def apply(self, records: Iterable[Mapping[str, Any]], indices: Sequence[Any] | None = None) -> list[dict[str, Any]]:
        if self._function is None:
            self._function = resolve(self.hook)
        out = []
        for n, record in enumerate(records):
            at = f"record {indices[n]}" if indices is not None else "a record"
            try:
                result = self._function(dict(record))
            except StopIteration:
                # Raised through a grain iterator it would end the stream as if the data ran out.
                raise RuntimeError(
                    f"preprocess {label(self.hook)} raised StopIteration on {at} of {self.where}"
                ) from None
            except KeyError as missing:
                raise KeyError(
                    f"preprocess {label(self.hook)} looked for column {missing.args[0]!r}, which {at} of "
                    f"{self.where} lacks; its columns are {', '.join(map(repr, record))}"
                ) from None
            if not isinstance(result, Mapping):
                raise TypeError(
                    f"preprocess {label(self.hook)} returned {type(result).__name__} for {at} of {self.where}; "
                    "it must return a dict of columns"
                )
            out.append(dict(result))
        return out


def collate_columns(
    columns: Mapping[str, Sequence[Any]], where: str, indices: Sequence[Any] | None = None
) -> dict[str, Any]:
    """A batch from column-major data (what Arrow hands back), naming a column whose rows do not stack.

    An empty cell (None) is refused with its record: stacked, it would make the column an array of
    Python objects, or a list of text holding None, which fails only later and far from its row.
    """
    out = {}
    for name, values in columns.items():
        values = list(values)
        empty = next((n for n, v in enumerate(values) if v is None), None)
        if empty is not None:
            at = f"record {indices[empty]}" if indices is not None else f"row {empty} of a batch"
            raise ValueError(
                f"column {name!r} of {where} is empty (None) in {at}; a preprocess hook can fill it or drop the column"
            )
        try:
            out[name] = collate(values)
        except ValueError as error:
            shapes = sorted({np.shape(v) for v in values})
            raise ValueError(
                f"column {name!r} of {where} does not stack into one array: its rows have shapes {shapes[:4]}; "
                f"a preprocess hook can pad, cut or drop it ({error})"
            ) from None
    return out


def collate_rows(
    records: Sequence[Mapping[str, Any]], where: str, indices: Sequence[Any] | None = None
) -> dict[str, Any]:
    """A batch from row dicts, through the same per-column rule as collate_columns."""
    if not records:
        raise ValueError(f"cannot collate an empty batch of {where}")
    keys = list(records[0])
    for n, record in enumerate(records):
        if record.keys() != set(keys):
            raise ValueError(
                f"row {n} of a batch of {where} has columns {sorted(record)}, unlike row 0's {sorted(keys)}"
            )
    return collate_columns({k: [r[k] for r in records] for k in keys}, where, indices)

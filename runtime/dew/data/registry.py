"""The `datasets` registry: every dataset kind by name, and specs from their JSON config."""

from __future__ import annotations

from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from dew.data.config import from_fields
from dew.data.spec import DatasetSpec

SpecType = TypeVar("SpecType", bound=type[DatasetSpec])


class Registry(Mapping[str, type[DatasetSpec]]):
    """Maps names to dataset kinds.

    `@datasets("name")` registers a frozen DatasetSpec subclass; `datasets["name"](...)` builds one;
    `datasets.Name` reaches a kind by its class name; `datasets.from_config(data)` rebuilds a spec from
    `spec.to_config()`.
    """

    def __init__(self) -> None:
        self._kinds: dict[str, type[DatasetSpec]] = {}

    def __call__(self, name: str) -> Callable[[SpecType], SpecType]:
        def register(cls: SpecType) -> SpecType:
            if not (isinstance(cls, type) and issubclass(cls, DatasetSpec)):
                raise TypeError(f"@datasets({name!r}) decorates DatasetSpec subclasses, not {cls!r}")
            # The class itself must be a dataclass: a plain subclass would inherit the base's fields only.
            params = cls.__dict__.get("__dataclass_params__")
            if params is None or not params.frozen:
                raise TypeError(f"@datasets({name!r}): {cls.__name__} must be a frozen dataclass")
            existing = self._kinds.get(name)
            if existing is not None and existing.__qualname__ != cls.__qualname__:
                raise ValueError(f"dataset name {name!r} is taken by {existing.__qualname__}")
            cls.kind = name
            self._kinds[name] = cls
            return cls

        return register

    def __getitem__(self, name: str) -> type[DatasetSpec]:
        try:
            return self._kinds[name]
        except KeyError:
            raise KeyError(f"no dataset named {name!r}; registered: {', '.join(sorted(self._kinds))}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._kinds))

    def __len__(self) -> int:
        return len(self._kinds)

    def __getattr__(self, attr: str) -> type[DatasetSpec]:
        if attr.startswith("_"):
            raise AttributeError(attr)
        for cls in self._kinds.values():
            if cls.__name__ == attr:
                return cls
        raise AttributeError(
            f"no dataset kind {attr!r}; kinds: {', '.join(sorted(c.__name__ for c in self._kinds.values()))}"
        )

    def names(self) -> list[str]:
        return sorted(self._kinds)

    def from_config(self, data: Mapping[str, Any]) -> DatasetSpec:
        """The spec `to_config` wrote: `{"kind": name, **fields}`."""
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ValueError(f"a dataset config is an object with a 'kind' key, got {data!r}")
        fields = dict(data)
        cls = self[fields.pop("kind")]
        return from_fields(cls, fields, cls.kind)


datasets = Registry()

"""The `datasets` registry: every dataset kind by name, and specs from their JSON config.

A kind is declared in one place, the `@datasets("name")` on its class. The registry finds the modules
that hold those declarations itself, on its first lookup: every module of the dew.data package whose
source has a line starting `@datasets(`, and every module or object named in the `dew.datasets`
entry-point group of an installed distribution (how another package adds kinds). Modules are imported
only then, and only those, so `import dew.data` stays cheap and no list of kinds is kept anywhere else.
"""

from __future__ import annotations

import contextlib
import dataclasses
import importlib
import importlib.abc
import importlib.metadata
import importlib.util
import pkgutil
import re
import sys
import threading
from collections.abc import Callable, Iterator, Mapping
from typing import Any, TypeVar

from dew.data.config import from_fields
from dew.data.kinds import KindAttributes
from dew.data.spec import DatasetSpec

SpecType = TypeVar("SpecType", bound=type[DatasetSpec])

ENTRY_POINTS = "dew.datasets"
_DECLARES_A_KIND = re.compile(r"^@datasets\(", re.MULTILINE)


class Registry(KindAttributes, Mapping[str, type[DatasetSpec]]):
    """Maps names to dataset kinds.

    `@datasets("name")` registers a frozen DatasetSpec subclass; `datasets["name"](...)` builds one;
    `datasets.Name` reaches a kind by its class name; `datasets.from_config(data)` rebuilds a spec from
    `spec.to_config()`. `discover`, when given, runs once before the first lookup, to import whatever
    registers the kinds. KindAttributes (dew.data.kinds, generated) declares each built-in kind's
    attribute for type checkers, so `datasets.PackedTokens(...)` is checked against its signature.
    `dew.data.datasets` is the one registry every built-in kind registers in.

    Args:
        discover: Imports what registers the kinds, once, before the first lookup; None for a
            registry that holds only what is registered in it by hand.

    Examples:
        >>> import dataclasses
        >>> from dew.data import DatasetSpec
        >>> from dew.data.registry import Registry
        >>> kinds = Registry()
        >>> @kinds("toy")
        ... @dataclasses.dataclass(frozen=True)
        ... class Toy(DatasetSpec):
        ...     path: str = ""
        >>> list(kinds), kinds["toy"] is kinds.Toy
        (['toy'], True)
        >>> kinds.from_config({"kind": "toy", "path": "corpus"}).path
        'corpus'
    """

    def __init__(self, discover: Callable[[], None] | None = None) -> None:
        self._kinds: dict[str, type[DatasetSpec]] = {}
        self._discover = discover
        # Reentrant: a kind module imported by discovery may itself look a kind up.
        self._lock = threading.RLock()

    def _complete(self) -> dict[str, type[DatasetSpec]]:
        """Every kind, once discovery has run; another thread's lookup waits for it."""
        if self._discover is not None:
            with self._lock:
                discover, self._discover = self._discover, None
                if discover is not None:
                    try:
                        discover()
                    except BaseException:
                        self._discover = discover  # the next lookup retries, and names the failure again
                        raise
        return self._kinds

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
            code = getattr(cls.__repr__, "__code__", None)
            if code is not None and code.co_filename == dataclasses.__file__:
                # @dataclass wrote its own repr over the base's: a spec shows what its Loading starts.
                cls.__repr__ = DatasetSpec.__repr__  # type: ignore[method-assign]
            self._kinds[name] = cls
            return cls

        return register

    def __getitem__(self, name: str) -> type[DatasetSpec]:
        kinds = self._complete()
        try:
            return kinds[name]
        except KeyError:
            raise KeyError(f"no dataset named {name!r}; registered: {', '.join(sorted(kinds))}") from None

    def __iter__(self) -> Iterator[str]:
        return iter(sorted(self._complete()))

    def __len__(self) -> int:
        return len(self._complete())

    def __getattr__(self, attr: str) -> type[DatasetSpec]:
        if attr.startswith("_"):
            raise AttributeError(attr)
        kinds = self._complete().values()
        for cls in kinds:
            if cls.__name__ == attr:
                return cls
        raise AttributeError(f"no dataset kind {attr!r}; kinds: {', '.join(sorted(c.__name__ for c in kinds))}")

    def names(self) -> list[str]:
        """Every registered kind's name, sorted.

        Returns:
            The names `datasets[name]` and a config's `"kind"` take.

        Examples:
            >>> from dew.data import datasets
            >>> "packed_tokens" in datasets.names()
            True
        """
        return sorted(self._complete())

    @contextlib.contextmanager
    def scoped(self) -> Iterator[Registry]:
        """A block after which the registry holds the kinds it held before: one registered inside is gone,
        one replaced is back. For a test that registers a kind of its own (or imports a module that does),
        so that no later test, and no listing of the kinds, meets it.

        Returns:
            A context manager that yields this registry.

        Examples:
            >>> import dataclasses
            >>> from dew.data import DatasetSpec, datasets
            >>> with datasets.scoped():
            ...     @datasets("scratch")
            ...     @dataclasses.dataclass(frozen=True)
            ...     class Scratch(DatasetSpec):
            ...         path: str = ""
            ...     "scratch" in datasets.names()
            True
            >>> "scratch" in datasets.names()
            False
        """
        with self._lock:
            kinds = self._complete()
            before = dict(kinds)
        try:
            yield self
        finally:
            with self._lock:
                kinds.clear()
                kinds.update(before)

    def from_config(self, data: Mapping[str, Any]) -> DatasetSpec:
        """The spec `to_config` wrote: `{"kind": name, **fields}`."""
        if not isinstance(data, Mapping) or "kind" not in data:
            raise ValueError(f"a dataset config is an object with a 'kind' key, got {data!r}")
        fields = dict(data)
        cls = self[fields.pop("kind")]
        return from_fields(cls, fields, cls.kind)


def _discover() -> None:
    """Imports every dew.data module that declares a kind, then every `dew.datasets` entry point."""
    import dew.data

    for module in pkgutil.walk_packages(dew.data.__path__, "dew.data.", onerror=_reraise):
        if module.ispkg or module.name in sys.modules:
            continue
        loader = getattr(importlib.util.find_spec(module.name), "loader", None)
        source = loader.get_source(module.name) if isinstance(loader, importlib.abc.InspectLoader) else None
        if source is not None and _DECLARES_A_KIND.search(source):
            importlib.import_module(module.name)
    for entry_point in importlib.metadata.entry_points(group=ENTRY_POINTS):
        entry_point.load()


def _reraise(package: str) -> None:
    # walk_packages would skip a subpackage that fails to import, and with it every kind it declares.
    raise ImportError(f"{package} failed to import, so the dataset kinds it declares cannot register")


datasets = Registry(_discover)

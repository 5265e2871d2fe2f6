"""Specs to JSON-able data and back, driven by each dataclass's own field types.

A run's config names its data completely: `to_config(spec)` gives `{"kind": name, **fields}` and
`from_config` rebuilds the identical spec, refusing an unknown kind or field by listing the valid ones.
"""

from __future__ import annotations

import dataclasses
import types
import typing
from collections.abc import Mapping, Sequence
from typing import Annotated, Any, Union, get_args, get_origin, get_type_hints


@dataclasses.dataclass(frozen=True)
class JsonList:
    """Marks a tuple field whose JSON form is a list of `item` dataclasses."""

    item: type


def json_list_argument(item: type) -> JsonList:
    """Marks a tuple field of a spec whose config form is a JSON list of `item` objects.

    Put it in the field's Annotated type: `to_config` writes each element as an object of its fields,
    and `from_config` builds each element back from one, naming the element that is wrong.

    Args:
        item: The dataclass each element of the list is.

    Returns:
        The annotation metadata that from_config looks for.

    Examples:
        >>> import dataclasses
        >>> from typing import Annotated
        >>> from dew.data import DataPhase, json_list_argument
        >>> from dew.data.config import from_fields
        >>> @dataclasses.dataclass(frozen=True)
        ... class Run:
        ...     phases: Annotated[tuple[DataPhase, ...], json_list_argument(DataPhase)] = ()
        >>> from_fields(Run, {"phases": [{"path": "web", "until_step": 100}, {"path": "code"}]}, "run").phases
        (DataPhase(path='web', until_step=100), DataPhase(path='code', until_step=None))
    """
    return JsonList(item)


def to_config(spec: Any) -> dict[str, Any]:
    kind = getattr(type(spec), "kind", "")
    if not kind:
        raise TypeError(f"{type(spec).__name__} is not a registered dataset kind")
    return {"kind": kind, **_fields_to_data(spec)}


def _fields_to_data(value: Any) -> dict[str, Any]:
    return {f.name: _to_data(getattr(value, f.name)) for f in dataclasses.fields(value) if f.init}


def _to_data(value: Any) -> Any:
    if dataclasses.is_dataclass(value) and not isinstance(value, type):
        return _fields_to_data(value)
    if isinstance(value, Mapping):
        return {str(k): _to_data(v) for k, v in value.items()}
    if isinstance(value, tuple | list):
        return [_to_data(v) for v in value]
    if value is None or isinstance(value, bool | int | float | str):
        return value
    raise TypeError(f"{type(value).__name__} value {value!r} has no JSON form")


def from_fields(cls: type, data: Mapping[str, Any], where: str) -> Any:
    """Builds dataclass `cls` from `data`, converting each field by its declared type."""
    if not isinstance(data, Mapping):
        raise TypeError(f"{where}: expected an object of {cls.__name__} fields, got {type(data).__name__}")
    fields = {f.name: f for f in dataclasses.fields(cls) if f.init}
    unknown = sorted(set(data) - set(fields))
    if unknown:
        raise ValueError(
            f"{where}: {cls.__name__} has no field {', '.join(map(repr, unknown))}; "
            f"valid fields: {', '.join(sorted(fields))}"
        )
    hints = get_type_hints(cls, include_extras=True)
    kwargs = {name: _from_data(hints[name], value, f"{where}.{name}") for name, value in data.items()}
    return cls(**kwargs)


def _from_data(hint: Any, value: Any, where: str) -> Any:
    origin = get_origin(hint)
    if origin is Annotated:
        base, *extras = get_args(hint)
        for extra in extras:
            if isinstance(extra, JsonList):
                if not isinstance(value, Sequence) or isinstance(value, str):
                    raise TypeError(f"{where}: expected a list of {extra.item.__name__}, got {value!r}")
                return tuple(
                    v if isinstance(v, extra.item) else from_fields(extra.item, v, f"{where}[{i}]")
                    for i, v in enumerate(value)
                )
        return _from_data(base, value, where)
    if origin in (Union, types.UnionType):
        options = [a for a in get_args(hint) if a is not type(None)]
        if value is None:
            return None
        classes = [a for a in options if isinstance(a, type) and dataclasses.is_dataclass(a)]
        if isinstance(value, Mapping) and classes:
            return _pick_dataclass(classes, value, where)
        for option in options:
            if _fits(option, value):
                return _from_data(option, value, where)
        return value
    if dataclasses.is_dataclass(hint) and isinstance(hint, type):
        return value if isinstance(value, hint) else from_fields(hint, value, where)
    if origin is tuple:
        args = get_args(hint)
        if isinstance(value, list | tuple):
            if len(args) == 2 and args[1] is Ellipsis:
                return tuple(_from_data(args[0], v, f"{where}[{i}]") for i, v in enumerate(value))
            return tuple(value)
    if origin in (Mapping, dict, typing.Mapping) and isinstance(value, Mapping):
        return dict(value)
    return value


def _pick_dataclass(classes: list[type], value: Mapping[str, Any], where: str) -> Any:
    for cls in classes:
        if set(value) <= {f.name for f in dataclasses.fields(cls)}:
            return from_fields(cls, value, where)
    names = " or ".join(c.__name__ for c in classes)
    raise ValueError(f"{where}: fields {sorted(value)} fit none of {names}")


def _fits(option: Any, value: Any) -> bool:
    base = get_origin(option) or option
    if base is Annotated:
        return _fits(get_args(option)[0], value)
    if base in (Mapping, dict, typing.Mapping):
        return isinstance(value, Mapping)
    if base in (tuple, list, Sequence):
        return isinstance(value, list | tuple)
    return isinstance(base, type) and isinstance(value, base)

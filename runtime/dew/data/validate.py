"""The checks every config class makes of its numbers, so one mistake reads the same everywhere.

`where` names the value the way its owner spells it, `Class.field` for a field, and leads the message.
A bool is an int to Python but never a count here, so the int checks refuse it.
"""

from __future__ import annotations

import math
from collections.abc import Mapping, Sequence
from typing import Any, TypeGuard


def is_int(value: object) -> TypeGuard[int]:
    """A plain int, not a bool."""
    return isinstance(value, int) and not isinstance(value, bool)


def an_int(where: str, value: object) -> None:
    """Refuses, with a TypeError, anything but an int; for values whose range is checked apart."""
    if not is_int(value):
        raise TypeError(f"{where} must be an int, got {value!r}")


def at_least(where: str, value: int, low: int) -> None:
    """Refuses an int below `low`; the type is checked before this."""
    if value < low:
        raise ValueError(f"{where} must be at least {low}, got {value}")


def positive_int(where: str, value: object, *, optional: bool = False) -> None:
    """Refuses anything but an int of 1 or more (or None, when optional)."""
    if optional and value is None:
        return
    if not is_int(value) or value < 1:
        raise ValueError(f"{where} must be a positive int{' or None' if optional else ''}, got {value!r}")


def non_negative_int(where: str, value: object, *, optional: bool = False) -> None:
    """Refuses anything but an int of 0 or more (or None, when optional)."""
    if optional and value is None:
        return
    if not is_int(value) or value < 0:
        raise ValueError(f"{where} must be a non-negative int{' or None' if optional else ''}, got {value!r}")


def fields(
    owner: object, *, positive: Sequence[str] = (), non_negative: Sequence[str] = (), optional: Sequence[str] = ()
) -> None:
    """Checks `owner`'s int fields by name: positive ones, non-negative ones, and optional ones (a
    non-negative int or None), each refused as `Class.field`."""
    kind = type(owner).__name__
    for name in positive:
        positive_int(f"{kind}.{name}", getattr(owner, name))
    for name in non_negative:
        non_negative_int(f"{kind}.{name}", getattr(owner, name))
    for name in optional:
        non_negative_int(f"{kind}.{name}", getattr(owner, name), optional=True)


def weight(where: str, value: object) -> None:
    """Refuses a mixture weight that is not a finite number above zero."""
    if isinstance(value, bool) or not isinstance(value, int | float) or not math.isfinite(value) or value <= 0:
        raise ValueError(f"{where}: weight must be a positive number, got {value!r}")


def mixture(where: str, weights: Mapping[Any, object]) -> None:
    """Refuses an empty {name: weight} mixture, a name that is not a non-empty str, or a bad weight."""
    if not weights:
        raise ValueError(f"{where} is an empty mixture; name at least one")
    for name, value in weights.items():
        if not isinstance(name, str) or not name:
            raise ValueError(f"{where}: mixture keys are names, got {name!r}")
        weight(f"{where}[{name!r}]", value)

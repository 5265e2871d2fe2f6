"""UserError: the base of every mistake a user can fix, wherever dew raises it.

`dew-preprocess` reports a user error as one line and exit code 2, and a Beam worker keeps its
traceback off the shared stderr (dew.preprocess.quiet); anything else is a bug and keeps its
traceback. Both recognise a user error by its class: raised here, by its MRO; relayed from a worker
as text, by its qualified name. So an error class says what it is by subclassing UserError, and the
names are derived from the subclasses, never listed by hand.
"""

from __future__ import annotations

# Error classes defined where they cannot subclass UserError yet, counted as user errors all the same.
_ADOPTED: list[type[BaseException]] = []


class UserError(Exception):
    """A mistake the user can fix (a flag, an input, a damaged file): its message names what and how."""


def adopt(error: type[BaseException]) -> type[BaseException]:
    """Counts `error` as a user error although it does not subclass UserError; returns it."""
    if error not in _ADOPTED:
        _ADOPTED.append(error)
    return error


def qualified_name(error: type[BaseException]) -> str:
    return f"{error.__module__}.{error.__qualname__}"


def user_error_classes() -> tuple[type[BaseException], ...]:
    """Every user error class defined in a module imported so far, and the adopted ones."""
    found: list[type[BaseException]] = []
    todo: list[type[BaseException]] = [UserError, *_ADOPTED]
    while todo:
        cls = todo.pop()
        if cls not in found:
            found.append(cls)
            todo.extend(cls.__subclasses__())
    return tuple(found)


def user_error_names() -> frozenset[str]:
    """The qualified names of user_error_classes(): how a relayed traceback names one."""
    return frozenset(qualified_name(cls) for cls in user_error_classes() if cls is not UserError)


def is_user_error(error: BaseException) -> bool:
    """Whether `error` is a user error by its class (any class of its MRO by qualified name, so that an
    error unpickled from a worker counts the same)."""
    names = user_error_names()
    return any(qualified_name(cls) in names for cls in type(error).__mro__)

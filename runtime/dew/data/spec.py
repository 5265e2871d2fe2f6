"""The spec base class: what every dataset kind shares."""

from __future__ import annotations

import dataclasses
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from dew.data.loading import Loading

if TYPE_CHECKING:
    from dew.data.dataset import Dataset

# A caption reader: takes a batch of caption strings, returns what the model's text encoder reads.
Tokenize = Callable[[Sequence[str]], Any]


def check_ints(
    spec: object, *, positive: Sequence[str] = (), non_negative: Sequence[str] = (), optional: Sequence[str] = ()
) -> None:
    """Refuses, by `Class.field`, an int field that is not positive, not non-negative, or (optional) not
    a non-negative int or None. Shared by every kind so each says the same thing about the same mistake."""
    owner = type(spec).__name__

    def whole(value: object) -> bool:
        return isinstance(value, int) and not isinstance(value, bool)

    for name in positive:
        value = getattr(spec, name)
        if not whole(value) or value < 1:
            raise ValueError(f"{owner}.{name} must be a positive int, got {value!r}")
    for name in non_negative:
        value = getattr(spec, name)
        if not whole(value) or value < 0:
            raise ValueError(f"{owner}.{name} must be a non-negative int, got {value!r}")
    for name in optional:
        value = getattr(spec, name)
        if value is not None and (not whole(value) or value < 0):
            raise ValueError(f"{owner}.{name} must be a non-negative int or None, got {value!r}")


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """Says what a dataset is and how it is read; each kind is a frozen dataclass registered by name.

    seed decides the record order and keys any per-record randomness; loading only sets the speed.
    Both are keyword-only so a kind may declare required fields of its own.
    """

    seed: int = 0
    loading: Loading = dataclasses.field(default_factory=Loading)

    # Set by the registry: the name this kind is registered under.
    kind: ClassVar[str] = ""

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        """The dataset's batches: `batch` records a step across every process."""
        raise NotImplementedError(f"{type(self).__name__} does not implement load")

    def uncaptioned(self, tokenize: Tokenize | None) -> None:
        """Refuses a caption reader given to a kind that has no captions to hand it.

        Ignoring it would let a conditional run train on nothing without a word.
        """
        if tokenize is not None:
            raise ValueError(
                f"{type(self).__name__} carries no captions, so tokenize= has nothing to read; "
                "drop tokenize= or load a captioned dataset"
            )

    def to_config(self) -> dict[str, Any]:
        """This spec as JSON-able data naming its kind, so a run's config names its data completely."""
        from dew.data.config import to_config

        return to_config(self)

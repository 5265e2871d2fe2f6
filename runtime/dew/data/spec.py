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

"""What every dataset kind shares: how fast it is read (Loading) and the spec base class."""

from __future__ import annotations

import dataclasses
import math
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

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
class Loading:
    """Grain's four throughput knobs. None of them changes which records a run sees or their content.

    workers are processes (0 reads in the training process), threads the reads one worker keeps in
    flight, read_buffer the records one worker reads ahead, and worker_buffer the whole batches one
    worker holds ready for the trainer.
    """

    workers: int = 32
    threads: int = 64
    read_buffer: int = 128
    worker_buffer: int = 2

    def __post_init__(self) -> None:
        for name in ("workers", "threads", "read_buffer", "worker_buffer"):
            value = getattr(self, name)
            if not isinstance(value, int) or isinstance(value, bool) or value < 0:
                raise ValueError(f"Loading.{name} must be a non-negative int, got {value!r}")
        for name in ("threads", "read_buffer", "worker_buffer"):
            if getattr(self, name) < 1:
                raise ValueError(f"Loading.{name} must be at least 1, got {getattr(self, name)}")

    @property
    def stop_seconds(self) -> float:
        """How long stopping this many workers may take.

        Grain joins its worker processes one after another, about half a second each when idle and up
        to one batch's work when busy, so the allowance grows with the worker count.
        """
        return 5.0 + 1.0 * self.workers

    def prefetch_batches(self, rows: int) -> int:
        """read_buffer counts records; the stream prefetches whole batches of `rows` records."""
        return max(1, math.ceil(self.read_buffer / max(rows, 1)))


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

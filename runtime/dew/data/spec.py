"""The spec base class: what every dataset kind shares."""

from __future__ import annotations

import dataclasses
import functools
from collections.abc import Callable, Sequence
from typing import TYPE_CHECKING, Any, ClassVar

from dew.data import validate
from dew.data.loading import Loading

if TYPE_CHECKING:
    from dew.data.dataset import Dataset, Decode
    from dew.data.formats import Meta
    from dew.data.order import Order

VAL_BATCHES = 4
"""The validation batches an indexed kind scores by default: a steady score at little reading."""
# The splits of a committed directory that validation reads, the first one present.
VALIDATION_SPLITS = ("val", "validation")

# A caption reader: takes a batch of caption strings, returns what the model's text encoder reads.
Tokenize = Callable[[Sequence[str]], Any]


def _reading_meta_once(load: Callable[..., Any]) -> Callable[..., Any]:
    """A kind's load, during which each directory's meta.json is read once (formats.read_once), however
    many of its parts (splits, section, derived files, the held-out split) ask for it."""

    @functools.wraps(load)
    def once(self: Any, *args: Any, **kwargs: Any) -> Any:
        from dew.data.formats import read_once

        with read_once():
            return load(self, *args, **kwargs)

    once._reads_meta_once = True  # type: ignore[attr-defined]
    return once


@dataclasses.dataclass(frozen=True, kw_only=True)
class DatasetSpec:
    """Says what a dataset is and how it is read; each kind is a frozen dataclass registered by name.

    seed decides the record order and keys any per-record randomness; loading only sets the speed.
    Both are keyword-only so a kind may declare required fields of its own.

    Args:
        seed: Orders the records and keys every per-record draw (crops, flips, clip starts).
        loading: How fast records are read (dew.data.Loading); it changes no record and no order.

    Examples:
        >>> from dew.data import DatasetSpec, datasets
        >>> spec = datasets.TokenWindows(path="tokens.bin", seed=3)
        >>> isinstance(spec, DatasetSpec), spec.seed
        (True, 3)
    """

    seed: int = 0
    loading: Loading = dataclasses.field(default_factory=Loading)

    # Set by the registry: the name this kind is registered under.
    kind: ClassVar[str] = ""
    # A kind whose reads are plain copies out of a memmap sets this: a worker process would only copy
    # each batch once more through shared memory, so the default Loading reads in the training process.
    reads_in_process: ClassVar[bool] = False
    # A kind that decodes its records (images, clips) sets this: its reads are work a worker process
    # takes off the trainer, so the default Loading starts workers once there are records enough.
    decodes: ClassVar[bool] = False

    def __init_subclass__(cls, **kwargs: Any) -> None:
        super().__init_subclass__(**kwargs)
        own = cls.__dict__.get("load")
        if own is not None and not getattr(own, "_reads_meta_once", False):
            cls.load = _reading_meta_once(own)  # type: ignore[method-assign]

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        """The dataset's batches: `batch` records a step across every process.

        Args:
            batch: The global batch, the records one step reads across every process.
            tokenize: Reads the captions of a captioned kind (AutoTextTokenizer, say); a kind without
                captions refuses one.

        Returns:
            The Dataset: `train(partition)` and `val(partition)` open batch iterators over a share.

        Examples:
            >>> import os, tempfile
            >>> import numpy as np
            >>> from dew.data import Loading, datasets
            >>> path = os.path.join(tempfile.mkdtemp(), "tokens.bin")
            >>> np.arange(100, dtype=np.uint16).tofile(path)
            >>> spec = datasets.TokenWindows(path=path, seq_len=8, val_batches=0, loading=Loading(workers=0))
            >>> data = spec.load(batch=2)
            >>> data.batch, data.records, data.val is None
            (2, 12, True)
        """
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

    def __repr__(self) -> str:
        """The spec's fields, with a default Loading shown as what it starts rather than the seed's 32."""
        shown = []
        for field in dataclasses.fields(self):
            if not field.repr:
                continue
            value = getattr(self, field.name)
            if isinstance(value, Loading):
                text = value.describe(in_process=self.reads_in_process, decodes=self.decodes)
            else:
                text = repr(value)
            shown.append(f"{field.name}={text}")
        return f"{type(self).__qualname__}({', '.join(shown)})"

    def to_config(self) -> dict[str, Any]:
        """This spec as JSON-able data naming its kind, so a run's config names its data completely."""
        from dew.data.config import to_config

        return to_config(self)


@dataclasses.dataclass(frozen=True, kw_only=True)
class IndexedSpec(DatasetSpec):
    """A kind read by index: one global record order to train on and one held-out pass to validate.

    Each such kind declares `val_batches: int | None` where its signature wants it (VAL_BATCHES by
    default, unless it says otherwise); this class gives it one meaning. A number bounds the
    validation pass to that many whole global batches, 0 holds nothing out, and None scores the
    whole validation split, or holds nothing out where there is no split, only a tail to cut.
    """

    # Declared by each kind, not here: a field here would move it in every kind's signature.
    # A property to the type checker, so that it is no field of this class either and cannot take the
    # place of each kind's own.
    if TYPE_CHECKING:

        @property
        def val_batches(self) -> int | None: ...

    def __post_init__(self) -> None:
        validate.fields(self, optional=("val_batches",))

    def global_dataset(
        self,
        batch: int,
        *,
        train: Any,
        val: Any | None,
        order: Order | None = None,
        records: int | None = None,
        decode: Decode | None = None,
    ) -> Dataset:
        """The Dataset of this kind: a shuffled endless stream over `train` (or over `order`, a
        mixture or phases) and one pass over `val`, with this spec's seed, loading and val_batches;
        `decode(order, training)`, the kind's hook, puts its decoding over each order."""
        from dew.data.dataset import global_dataset

        return global_dataset(
            train=train,
            val=val,
            batch=batch,
            seed=self.seed,
            loading=self.loading,
            val_batches=self.val_batches,
            order=order,
            records=records,
            in_process=self.reads_in_process,
            decodes=self.decodes,
            decode=decode,
        )

    def held_out_split(self, meta: Meta | None, *, path: str, other_than: str | None = None) -> str | None:
        """The split of a committed directory (`meta`, None for a single file) that validation reads, other
        than `other_than`; None where there is none, and held_out_tail decides instead.

        One that holds no record is refused when validation is asked for (val_batches other than 0):
        the pass would otherwise be skipped and Dataset.val be None without a word, which a run that
        asked to score the split would only find at its first evaluation. With val_batches=0 it is None.
        """
        if meta is None:
            return None
        held = next((s for s in VALIDATION_SPLITS if s in meta.splits and s != other_than), None)
        if held is None or any(shard.records for shard in meta.splits[held]):
            return held
        if self.val_batches == 0:
            return None
        raise ValueError(
            f"{path}: its held-out split {held!r} holds no records to validate on; set val_batches=0 to train "
            "without validation, or rerun the job that wrote it with a larger --val_fraction"
        )

    def held_out_tail(self, available: int, batch: int, *, path: str, what: str) -> int | None:
        """Where validation starts when a corpus without a validation split gives val_batches whole
        batches off the end of its `available` training records (`what` names them); None when it
        gives none."""
        validate.positive_int("load(batch=)", batch)  # before the batch multiplies into a record count
        if not self.val_batches:
            return None
        tail = self.val_batches * batch
        if available <= tail:
            raise ValueError(
                f"{path}: {available} {what} cannot spare {tail} for validation; lower val_batches or the batch"
            )
        return available - tail

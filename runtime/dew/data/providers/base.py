"""What the hf and tfds kinds share: the fields a provider reads by, and the indexed load over them.

A provider is declared once, as a registered kind whose spec is a ProviderSpec: `@datasets("hf")` on
HubDataset makes "hf/..." an address load() reads, and the spec's `options` field (its default
factory) is the options type load() accepts for it. load() dispatches through that alone.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dew.data import validate
from dew.data.dataset import Dataset
from dew.data.providers.hooks import Preprocess, hook_name
from dew.data.providers.splits import overlap
from dew.data.records import Records
from dew.data.registry import datasets
from dew.data.spec import IndexedSpec, Tokenize

if TYPE_CHECKING:
    from datasets import Dataset as ArrowDataset
    from datasets import IterableDataset

# One dataset by the provider's name for it, or several with the share of a step each fills.
Named = str | Mapping[str, float]


@dataclasses.dataclass(frozen=True)
class ProviderSpec(IndexedSpec):
    """A split of a dataset another library prepared, read by index through `read(name, split)`.

    `val_split` is read once in its own order as the validation pass, `val_batches` bounding it (None
    reads every whole batch); `records` overrides the training records one pass holds, which is the
    split's length otherwise. `preprocess` runs on every record before batching.
    """

    name: Named = ""
    split: str = "train"
    val_split: str | None = None
    val_batches: int | None = None
    records: int | None = None
    preprocess: Preprocess | None = None

    def __post_init__(self) -> None:
        super().__post_init__()
        kind = type(self).__name__
        if isinstance(self.name, Mapping):
            validate.mixture(f"{kind}.name", self.name)
            object.__setattr__(self, "name", {k: float(v) for k, v in self.name.items()})
        elif not isinstance(self.name, str):
            raise TypeError(f"{kind}.name is a dataset name or a {{name: weight}} mixture, got {self.name!r}")
        for field in ("split",) + (("val_split",) if self.val_split is not None else ()):
            value = getattr(self, field)
            if not isinstance(value, str) or not value:
                raise ValueError(f"{kind}.{field} must be a split name, got {value!r}")
        if self.val_split is not None and (shared := overlap(self.split, self.val_split)) is not None:
            raise ValueError(
                f"{kind}.val_split {self.val_split!r} holds records that split {self.split!r} trains on ({shared}): "
                "training and validation would overlap; hold out a slice training does not read "
                "(split='train[:90%]', val_split='train[90%:]')"
            )
        validate.fields(self, optional=("records",))
        if self.preprocess is not None:
            object.__setattr__(self, "preprocess", hook_name(self.preprocess))

    @classmethod
    def options_type(cls) -> type:
        """What this provider's `options` holds, and so what load(options=) takes for it."""
        field = next((f for f in dataclasses.fields(cls) if f.name == "options"), None)
        factory = dataclasses.MISSING if field is None else field.default_factory
        if not isinstance(factory, type):
            raise TypeError(f"{cls.__name__} is a provider, so it has an options field whose default_factory is a type")
        return factory

    def read(self, name: str, split: str) -> Records:
        """Split `split` of the dataset `name`, read by index, with this spec's preprocess hook."""
        raise NotImplementedError

    def rows(self, *, batch: int, dataset: ArrowDataset | IterableDataset | None) -> Dataset:
        """This spec's batches, over `dataset` when the caller already holds the split in memory.

        Only a provider whose library hands out such splits reads one (HubDataset); the others read
        what preparation left on disk, by name.
        """
        if dataset is not None:
            raise TypeError(f"dataset= is a split held in memory; a {self.kind} source reads its prepared files")
        return self.load(batch=batch)

    def names(self) -> dict[str, float]:
        """The datasets this spec reads with their weights; one dataset weighs 1."""
        if isinstance(self.name, Mapping):
            return dict(self.name)
        if not self.name:
            raise ValueError(f"{type(self).__name__}.name is empty: name the dataset to read")
        return {self.name: 1.0}

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        return self.indexed(batch, {name: self.read(name, self.split) for name in self.names()})

    def indexed(self, batch: int, train: Mapping[str, Records]) -> Dataset:
        """The shuffled endless stream over `train` (one source, or a mixture at this spec's weights)
        and one pass over the validation split, both positioned by a global record count."""
        names = self.names() if len(train) > 1 or isinstance(self.name, Mapping) else None
        val = None
        if self.val_split is not None and self.val_batches != 0:
            val = {name: self.read(name, self.val_split) for name in train}
        if names is None:
            (source,) = train.values()
            held_out = None if val is None else next(iter(val.values()))
            return self.global_dataset(batch, train=source, val=held_out, records=self.records)
        return _mixed(self, batch, train, val, names)

    def to_config(self) -> dict[str, Any]:
        if self.preprocess is not None and not isinstance(self.preprocess, str):
            raise TypeError(
                f"{type(self).__name__}.preprocess is {self.preprocess!r}, which has no name to import it by, so "
                "the spec has no config; pass a module-level function or its 'package.module:function' name"
            )
        return super().to_config()


def _mixed(
    spec: ProviderSpec,
    batch: int,
    train: Mapping[str, Records],
    val: Mapping[str, Records] | None,
    weights: Mapping[str, float],
) -> Dataset:
    """A weighted mixture: which dataset global record k comes from is index arithmetic (MixtureOrder),
    so the position stays one global record count; validation mixes the val splits at the same weights,
    each in its own order."""
    from dew.data.mixture import Corpus, MixtureOrder, mixed_records

    corpora = [Corpus(name, source, weights[name]) for name, source in train.items()]
    held_out = None
    if val is not None:
        held_out = MixtureOrder([Corpus(name, source, weights[name]) for name, source in val.items()], seed=None)
    return spec.global_dataset(
        batch,
        train=None,
        val=held_out,
        order=MixtureOrder(corpora, spec.seed),
        records=spec.records if spec.records is not None else mixed_records(corpora),
    )


def providers() -> dict[str, type[ProviderSpec]]:
    """Every provider by its address prefix, which is its registered kind name."""
    return {name: kind for name, kind in datasets.items() if issubclass(kind, ProviderSpec)}

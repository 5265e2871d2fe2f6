"""load(): a provider's dataset by its "provider/name" address, built as the registered spec."""

from __future__ import annotations

import dataclasses
from collections.abc import Mapping
from typing import TYPE_CHECKING, Any

from dew.data.dataset import Dataset
from dew.data.loading import Loading
from dew.data.providers.base import Named, providers
from dew.data.providers.hooks import Preprocess

if TYPE_CHECKING:
    from datasets import Dataset as ArrowDataset
    from datasets import IterableDataset

    from dew.data.providers.hf_options import HFOptions
    from dew.data.providers.tfds import TFDSOptions

# Arguments only a streaming provider's spec has fields for; another provider refuses them when set.
_STREAMING = ("streaming", "shuffle_buffer")


def load(
    source: Named,
    *,
    batch: int,
    options: HFOptions | TFDSOptions | None = None,
    split: str = "train",
    val_split: str | None = None,
    val_batches: int | None = None,
    records: int | None = None,
    preprocess: Preprocess | None = None,
    seed: int = 0,
    shuffle_buffer: int = 0,
    streaming: bool = False,
    loading: Loading = Loading(),
    dataset: ArrowDataset | IterableDataset | None = None,
) -> Dataset:
    """The Dataset behind `source`, read where its provider already holds it.

    `source` is `"tfds/<builder>"` or `"hf/<name>"`, or a `{source: weight}` mixture of one provider's
    datasets, each weight the share of a step it fills. This builds the registered spec and loads it:
    `load("hf/x", batch=8, options=o)` is `datasets["hf"](name="x", options=o).load(batch=8)`, so a run
    that wants the spec in its config can write that instead. `options` is the provider's own type, and the
    other provider's is a TypeError naming both. `dataset` is an HF split the caller already holds
    (a datasets.Dataset or IterableDataset), passed to HubDataset.rows because a table has no config.

    Args:
        source: `"hf/<name>"`, `"tfds/<builder>"`, or a {source: weight} mixture of one provider's.
        batch: The global batch.
        options: The provider's own options: HFOptions for hf, TFDSOptions for tfds.
        split: The split to train on.
        val_split: The split to validate on.
        val_batches: Batches a validation pass reads at most; None reads all.
        records: Training records of one pass, instead of the split's length.
        preprocess: A hook run on every record before batching.
        seed: Orders the records.
        shuffle_buffer: Rows HF's buffered shuffle holds when streaming.
        streaming: Read an hf split as it comes instead of by index.
        loading: How fast records are read.
        dataset: An HF split already in memory, read instead of one loaded by name.

    Returns:
        The Dataset of the spec built from these arguments.

    Examples:
        >>> import datasets as hf
        >>> from dew.data import DataPartition, Loading, load
        >>> table = hf.Dataset.from_dict({"x": list(range(8))})
        >>> data = load("hf/numbers", batch=4, dataset=table, loading=Loading(workers=0))
        >>> with data.train(DataPartition()) as stream:
        ...     batch = next(stream)
        >>> batch["x"].shape, data.records
        ((4,), 8)
    """
    found = providers()
    provider, name = _address(source, found)
    kind = found[provider]
    options_type = kind.options_type()
    if options is not None and not isinstance(options, options_type):
        raise TypeError(
            f"{provider} sources take {options_type.__name__} as options, got {type(options).__name__}; "
            + ", ".join(f"{p} takes {k.options_type().__name__}" for p, k in found.items())
        )
    fields: dict[str, Any] = {
        "name": name,
        "split": split,
        "val_split": val_split,
        "val_batches": val_batches,
        "records": records,
        "preprocess": preprocess,
        "seed": seed,
        # None was this parameter's default once; a caller who still passes it reads at the default.
        "loading": Loading() if loading is None else loading,
        "options": options or options_type(),
    }
    if _streams(kind):
        fields.update(streaming=streaming, shuffle_buffer=shuffle_buffer)
    elif streaming or shuffle_buffer:
        raise ValueError(
            f"{provider} sources are read by index: streaming= and shuffle_buffer= are for "
            + " and ".join(p for p, k in found.items() if _streams(k))
            + " sources"
        )
    spec = kind(**fields)
    return spec.load(batch=batch) if dataset is None else spec.rows(batch=batch, dataset=dataset)


def _streams(kind: type) -> bool:
    return set(_STREAMING) <= {field.name for field in dataclasses.fields(kind)}


def _address(source: Named, found: Mapping[str, type]) -> tuple[str, str | dict[str, float]]:
    """(provider, the spec's name field) of "provider/name" or a {"provider/name": weight} mapping."""
    if isinstance(source, str):
        return _split(source, found)
    if not isinstance(source, Mapping) or not source:
        raise TypeError(f"source is 'provider/name' or a non-empty {{source: weight}} mapping, got {source!r}")
    parts = {key: _split(key, found) for key in source}
    providers = sorted({p for p, _ in parts.values()})
    if len(providers) > 1:
        raise ValueError(
            f"a mixture reads one provider through one options value; {dict(source)} mixes {' and '.join(providers)}"
        )
    return providers[0], {parts[key][1]: weight for key, weight in source.items()}


def _split(source: str, found: Mapping[str, type]) -> tuple[str, str]:
    provider, sep, name = source.partition("/") if isinstance(source, str) else ("", "", "")
    if not sep or provider not in found or not name:
        raise ValueError(f"source {source!r} is not " + " or ".join(f"'{p}/<name>'" for p in found))
    return provider, name

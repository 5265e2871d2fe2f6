"""HubDataset, registered as "hf": one Hugging Face split, Arrow-backed and read by index, or streamed."""

from __future__ import annotations

import dataclasses
from typing import TYPE_CHECKING, Any

from dew.data import validate
from dew.data.dataset import Dataset
from dew.data.providers.base import ProviderSpec
from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hf_source import HFDatasetSource
from dew.data.records import Records
from dew.data.registry import datasets
from dew.data.spec import Tokenize

if TYPE_CHECKING:
    from datasets import Dataset as ArrowDataset
    from datasets import IterableDataset


@datasets("hf")
@dataclasses.dataclass(frozen=True)
class HubDataset(ProviderSpec):
    """Reads one Hugging Face split, Arrow-backed (by index) or streamed (as it comes).

    `name` is what load_dataset takes as its path (a hub repo, a builder such as "json" or "parquet"
    with options.data_files, a local directory) or a directory save_to_disk wrote. By index, the training
    stream is a seeded shuffle of every epoch and its position one global record count, which resumes on
    any share count. `streaming` reads the split as it comes instead: each share streams its own part
    (datasets' split_dataset_by_node), `shuffle_buffer` is how many rows HF's buffered shuffle holds
    (zero keeps file order), a pass has no length (so `records` is whatever the caller knows), and the
    position is that share's own, which resumes only on a reader of the same share. A validation pass
    is never shuffled.

    Args:
        name: load_dataset's path or a save_to_disk directory, or a {name: weight} mixture.
        split: The split to train on.
        val_split: The split to validate on.
        val_batches: Batches a validation pass reads at most; None reads all.
        records: Training records of one pass, instead of the split's length.
        preprocess: A hook run on every record before batching.
        streaming: Read the split as it comes instead of by index.
        shuffle_buffer: Rows HF's buffered shuffle holds when streaming.
        options: load_dataset's other arguments (HFOptions).

    Examples:
        >>> from dew.data import HFOptions, datasets
        >>> spec = datasets.HubDataset(name="json", options=HFOptions(data_files="rows.jsonl"))
        >>> spec.streaming, spec.options.data_files
        (False, 'rows.jsonl')
    """

    streaming: bool = False
    shuffle_buffer: int = 0
    options: HFOptions = dataclasses.field(default_factory=HFOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        if not isinstance(self.options, HFOptions):
            raise TypeError(
                f"HubDataset.options is HFOptions, got {type(self.options).__name__}"
                + (" (TFDSOptions belong to the tfds provider, PreparedTFDS)" if _is_tfds(self.options) else "")
            )
        if not isinstance(self.streaming, bool):
            raise TypeError(f"HubDataset.streaming is a bool, got {self.streaming!r}")
        validate.fields(self, non_negative=("shuffle_buffer",))
        if self.shuffle_buffer and not self.streaming:
            raise ValueError(
                "HubDataset.shuffle_buffer sizes the shuffle of a streamed split; a split read by index is "
                "shuffled by its seed alone: set streaming=True or drop shuffle_buffer"
            )

    def read(self, name: str, split: str) -> Records:
        return HFDatasetSource(name, split, options=self.options, preprocess=self.preprocess)

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        self.uncaptioned(tokenize)
        return self.rows(batch=batch, dataset=None)

    def rows(self, *, batch: int, dataset: ArrowDataset | IterableDataset | None) -> Dataset:
        """This spec's batches, over `dataset` when the caller already holds the split.

        A table in memory has no JSON form, so it is an argument here and not a field; it stands for
        `split` of `name`, and `val_split` still loads by name. An IterableDataset is streamed.
        """
        if dataset is None:
            if self.streaming:
                from dew.data.providers.hf_stream import streamed

                return streamed(self, batch, None)
            return self.indexed(batch, {name: self.read(name, self.split) for name in self.names()})
        import datasets as hf

        if not isinstance(self.name, str):
            raise ValueError("dataset= is one split, so the spec names one dataset, not a mixture")
        if self.val_split is not None and not self.name:
            raise ValueError(f"val_split={self.val_split!r} loads by name, and this spec names none: set name=")
        if isinstance(dataset, hf.IterableDataset):
            from dew.data.providers.hf_stream import streamed

            return streamed(self, batch, dataset)
        if self.shuffle_buffer:
            raise ValueError("shuffle_buffer sizes the shuffle of a streamed split; this one is read by index")
        source = HFDatasetSource(split=self.split, dataset=dataset, options=self.options, preprocess=self.preprocess)
        return self.indexed(batch, {self.name: source})


def _is_tfds(options: Any) -> bool:
    return type(options).__name__ == "TFDSOptions"

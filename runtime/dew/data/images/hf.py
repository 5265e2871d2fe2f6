"""HFImages: a Hugging Face dataset of images read by index, its stored image bytes straight from Arrow."""

from __future__ import annotations

import dataclasses
from typing import Any

import numpy as np

from dew.data.committed_records import WHERE
from dew.data.images.base import ImageDataset, Opened
from dew.data.providers.hf_options import HFOptions
from dew.data.providers.hf_source import HFDatasetSource
from dew.data.providers.splits import overlap
from dew.data.records import BatchRecords
from dew.data.registry import datasets

CAPTION_COLUMNS = ("caption", "text")


class HFImageSource(BatchRecords):
    """The image and caption columns of a datasets.Dataset, a batch a read.

    Rows are taken in Arrow format, so an Image column gives the file bytes it stores ({"bytes",
    "path"}) and nothing is decoded to PIL and encoded again on the way (datasets #7508). A row that
    holds a path but no bytes (a dataset of local files) is read from that path.
    """

    def __init__(self, table: HFDatasetSource, image: str, caption: str | None) -> None:
        columns = table.table().column_names
        for column in (image, caption):
            if column is not None and column not in columns:
                raise ValueError(f"{table.label} has no column {column!r}; its columns are {columns}")
        self.table, self.image, self.caption = table, image, caption
        self._arrow: Any = None

    def __getstate__(self) -> dict[str, Any]:
        return {**self.__dict__, "_arrow": None}

    def __len__(self) -> int:
        return len(self.table)

    @property
    def captioned(self) -> bool:
        return self.caption is not None

    def read_batch(self, indices: np.ndarray) -> dict[str, Any]:
        if self._arrow is None:
            self._arrow = self.table.table().with_format("arrow")
        rows = self.table._check([int(i) for i in np.asarray(indices).tolist()])
        taken = self._arrow[rows]
        where = [f"{self.table.label} row {i}" for i in rows]
        batch: dict[str, Any] = {
            "image": [_bytes(value, at) for value, at in zip(taken.column(self.image).to_pylist(), where, strict=True)],
            WHERE: where,
        }
        if self.caption is not None:
            batch["caption"] = ["" if c is None else str(c) for c in taken.column(self.caption).to_pylist()]
        return batch

    def describe(self) -> dict[str, Any]:
        return {**self.table.describe(), "image": self.image, "caption": self.caption}


def _bytes(value: Any, where: str) -> bytes:
    if isinstance(value, bytes):
        return value
    if isinstance(value, dict):
        if value.get("bytes") is not None:
            return value["bytes"]
        if value.get("path"):
            with open(value["path"], "rb") as f:
                return f.read()
    raise ValueError(f"{where}: the image column holds neither image bytes nor a readable path ({value!r:.80})")


@datasets("hf_images")
@dataclasses.dataclass(frozen=True)
class HFImages(ImageDataset):
    """Reads a Hugging Face dataset of images by index, captioned from its 'caption' or 'text' column.

    name is a hub dataset, a directory written by save_to_disk, or a loader and its data_files in
    options (an `imagefolder` of local files, say). caption_column overrides which column captions the
    images; a dataset with neither column is uncaptioned. val_split names a held-out split; without
    one, val_batches whole batches are held out of the end of split.

    Args:
        name: A hub dataset, a save_to_disk directory, or a loader such as "imagefolder".
        split: The split to train on.
        val_split: The held-out split, if the dataset has one.
        image_column: The column holding the images.
        caption_column: The column holding the captions, instead of `caption` or `text`.
        options: load_dataset's other arguments (HFOptions), data_files among them.

    Examples:
        >>> from dew.data import HFOptions, datasets
        >>> spec = datasets.HFImages(name="imagefolder", options=HFOptions(data_dir="photos"))
        >>> spec.image_column, spec.options.data_dir
        ('image', 'photos')
    """

    name: str | None = None
    split: str = "train"
    val_split: str | None = None
    image_column: str = "image"
    caption_column: str | None = None
    options: HFOptions = dataclasses.field(default_factory=HFOptions)

    def __post_init__(self) -> None:
        super().__post_init__()
        if self.val_split is not None and (shared := overlap(self.split, self.val_split)) is not None:
            raise ValueError(
                f"HFImages.val_split {self.val_split!r} holds images that split {self.split!r} trains on ({shared}): "
                "training and validation would overlap; hold out a slice training does not read"
            )

    def open(self, batch: int) -> Opened:
        if self.name is None:
            raise ValueError("HFImages.name is unset: name a hub dataset or a save_to_disk directory")
        records = self.source(self.split)
        if self.val_split is not None:
            return Opened(train=records, val=self.source(self.val_split), captioned=records.captioned)
        train, val = self.held_out(records, batch, where=f"hf {self.name!r}")
        return Opened(train=train, val=val, captioned=records.captioned)

    def source(self, split: str) -> HFImageSource:
        table = HFDatasetSource(name=self.name, split=split, options=self.options)
        caption = self.caption_column
        if caption is None:
            caption = next((c for c in CAPTION_COLUMNS if c in table.table().column_names), None)
        return HFImageSource(table, self.image_column, caption)

"""ArrayRecordImages: captioned images in ArrayRecord shards, committed by the images job or raw."""

from __future__ import annotations

import dataclasses
import os
from typing import Any

from dew.data import formats, locations
from dew.data.images import image_records
from dew.data.images.base import ImageDataset, Opened
from dew.data.images.image_records import ImageRecords
from dew.data.registry import datasets
from dew.data.sections import ImagesSection


@datasets("array_record_images")
@dataclasses.dataclass(frozen=True)
class ArrayRecordImages(ImageDataset):
    """Reads image and caption pairs from ArrayRecord shards, each record a packed dict.

    path is a committed `dew.images/1` directory (meta.json gives every shard's record count, so
    start-up opens no shard; its `val` split, when it has one, is the validation pass), or a raw shard
    set, path/*.array_record with no meta.json, as img2dataset writes it (`jpg` and `txt` are read as
    the image and the caption). With shards, path is a root and each `path/<shard>/` a raw shard set,
    all of them read as one corpus in the order listed. Fields beyond the image and the caption pass
    through as bytes. path may be gs:// or a gcsfuse mount of it.

    Args:
        path: A committed images directory, a raw shard set, or (with shards) the root of several.
        shards: Raw shard sets under path, read as one corpus in this order.
        split: The split of a committed directory to train on.
        image_size: The side of the square images, as ImageDataset says (crop_scale, random_crop,
            flip and val_batches too).

    Examples:
        >>> from dew.data import datasets
        >>> spec = datasets.ArrayRecordImages(path="gs://bucket/flowers", image_size=64, flip=True)
        >>> spec.image_size, spec.split
        (64, 'train')
    """

    path: str | None = None
    shards: tuple[str, ...] = ()
    split: str = "train"

    def open(self, batch: int) -> Opened:
        path = self.root()
        if self.shards:
            return self.opened(self.raw_sets(path, self.shards), batch, where=path)
        if locations.exists(os.path.join(path, formats.META)):
            meta = formats.read_meta(path, kind="images")  # once: every split below reads from it
            section = meta.section
            assert isinstance(section, ImagesSection)
            records = image_records.committed(meta, path, self.split)
            held = self.held_out_split(meta, path=path, other_than=self.split)
            tokens: dict[str, Any] = {
                "tokenizer": section.caption_tokenizer,
                "tokenizer_hash": section.caption_tokenizer_hash,
                "tokenizer_length": section.caption_length,
            }
            if held is not None:
                val = image_records.committed(meta, path, held)
                return Opened(train=records, val=val, captioned=records.captioned, **tokens)
            train, val = self.held_out(records, batch, where=path)
            return Opened(train=train, val=val, captioned=records.captioned, **tokens)
        return self.opened(image_records.raw(path, image_records.raw_files(path, asked=False)), batch, where=path)

    def root(self) -> str:
        """The directory this spec reads: path, which it must be given."""
        if self.path is None:
            raise ValueError(f"{type(self).__name__}.path is unset: name a committed images directory or a shard root")
        return self.path

    def raw_sets(self, root: str, names: tuple[str, ...]) -> ImageRecords:
        """Raw shard sets `root/<name>/` read as one corpus: every file of each, set by set."""
        files = [f for name in names for f in image_records.raw_files(os.path.join(root, name), asked=True)]
        return image_records.raw(root, files)

    def opened(self, records: ImageRecords, batch: int, *, where: str) -> Opened:
        train, val = self.held_out(records, batch, where=where)
        return Opened(train=train, val=val, captioned=records.captioned)

"""ImageDataset: the spec every image kind builds on, and what its load does with the records it opens."""

from __future__ import annotations

import dataclasses
import logging
from collections.abc import Sequence
from typing import Any, ClassVar

from dew.data import validate
from dew.data.captions import Captions
from dew.data.committed_records import Window
from dew.data.dataset import Dataset
from dew.data.images.batches import ImageOrder, ToPixels
from dew.data.mixture import Corpus, MixtureOrder, mixed_records
from dew.data.order import Order
from dew.data.spec import VAL_BATCHES, IndexedSpec, Tokenize

_log = logging.getLogger(__name__)


@dataclasses.dataclass(frozen=True)
class Opened:
    """What an image kind reads: its training and held-out records, or several corpora at weights.

    captioned says whether the records carry captions; tokenizer names the tokenizer that wrote the
    token ids stored beside them, when the caption-tokenize job did, tokenizer_hash is its hash and
    tokenizer_length the ids each caption was padded or cut to.
    """

    train: Any = None
    val: Any = None
    corpora: Sequence[Corpus] = ()
    val_corpora: Sequence[Corpus] = ()
    captioned: bool = True
    tokenizer: str | None = None
    tokenizer_hash: str | None = None
    tokenizer_length: int | None = None


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageDataset(IndexedSpec):
    """Captioned images read through grain, each resized to image_size × image_size RGB.

    A batch holds `image`, uint8 [B, image_size, image_size, 3], the `caption` strings, and every
    extra field a record carries. `text` holds the caption's token ids, {"input_ids",
    "attention_mask"}: from tokenize= when load is given one, or from the ids the caption-tokenize
    job stored. The shorter side is scaled to round(image_size × crop_scale), with OpenCV's INTER_AREA
    when it shrinks and INTER_LANCZOS4 when it grows, and a square is cut from its centre. For
    training, random_crop cuts it at a random place instead and flip mirrors half the images; both
    are drawn per record from (seed, the record's global index), so a resumed run sees the same
    pixels. Validation always cuts the centre and never flips.

    Each kind says what it opens (`open`); held-out records are its val split, or else val_batches
    whole batches off the end of its records (0 or None holds nothing out).

    Args:
        image_size: The side of the square every image is resized to, in pixels.
        crop_scale: The shorter side is scaled to round(image_size × crop_scale) before the square is cut.
        random_crop: For training, cut the square at a random place instead of the centre.
        flip: For training, mirror half the images left to right.
        val_batches: Whole batches held out of the end of the records when the kind has no val split.
        seed: Orders the records and keys each record's crop and flip.
        loading: How fast records are read and decoded.
    """

    decodes: ClassVar[bool] = True

    image_size: int = 256
    crop_scale: float = 1.0
    random_crop: bool = False
    flip: bool = False
    val_batches: int | None = VAL_BATCHES

    def __post_init__(self) -> None:
        super().__post_init__()
        validate.fields(self, positive=("image_size",))
        self.to_pixels()  # refuses a bad image_size or crop_scale now, not at the first batch

    def to_pixels(self) -> ToPixels:
        return ToPixels(self.image_size, self.crop_scale, flip=self.flip, random_crop=self.random_crop)

    def open(self, batch: int) -> Opened:
        """The records this kind reads, with `batch` the global batch a held-out tail is cut in."""
        raise NotImplementedError(f"{type(self).__name__} does not say what it reads")

    def load(self, *, batch: int, tokenize: Tokenize | None = None) -> Dataset:
        opened = self.open(batch)
        if not opened.captioned:
            self.uncaptioned(tokenize)
        captions = self.captions(opened, tokenize)

        def decode(order: Order, training: bool) -> Order:
            return self.decoded(order, captions, augment=training)

        if opened.corpora:
            order = MixtureOrder(opened.corpora, self.seed)
            val = MixtureOrder(opened.val_corpora, None) if opened.val_corpora else None
            records = mixed_records(opened.corpora)
            return self.global_dataset(batch, train=None, val=val, order=order, records=records, decode=decode)
        return self.global_dataset(batch, train=opened.train, val=opened.val, decode=decode)

    def decoded(self, order: Any, captions: Captions, *, augment: bool) -> ImageOrder:
        return ImageOrder(order, self.to_pixels(), captions, seed=self.seed, augment=augment)

    def captions(self, opened: Opened, tokenize: Tokenize | None) -> Captions:
        """Stored token ids when the records carry them and tokenize= agrees with them, else tokenize=.

        A tokenize= of another tokenizer is refused. One of the same tokenizer at another length than
        the stored ids (the job's --max_length against the tokenizer's context) tokenizes the captions,
        which the records still hold, at the length asked for, and says so once: ids of another width
        would reach the text encoder without a word otherwise.
        """
        if opened.tokenizer is None:
            return Captions(tokenize=tokenize)
        if tokenize is None:
            return Captions(stored=True)
        name = getattr(tokenize, "modelname", None) or getattr(tokenize, "name", None)
        if name != opened.tokenizer and not _hashes_to(tokenize, opened.tokenizer_hash):
            raise ValueError(
                f"{type(self).__name__}: the captions were tokenized offline by {opened.tokenizer!r}, and "
                f"tokenize= is {name or type(tokenize).__name__!r}; drop tokenize= to read the stored ids, "
                "or rerun the caption-tokenize job with the tokenizer this run wants"
            )
        asked = _context_length(tokenize)
        if asked == opened.tokenizer_length:
            return Captions(stored=True)
        _log.warning(
            "%s: the stored caption ids are %s long and tokenize= gives %s, so the captions are tokenized "
            "while loading and the stored ids are left unread; rerun the caption-tokenize job with "
            "--max_length %s to read stored ids, or drop tokenize= to read the %s-long ones",
            type(self).__name__,
            opened.tokenizer_length,
            asked if asked is not None else "ids of a length it does not state",
            asked if asked is not None else "N",
            opened.tokenizer_length,
        )
        return Captions(tokenize=tokenize, carried=True)

    def held_out(self, records: Any, batch: int, *, where: str) -> tuple[Any, Any]:
        """(train, val): the records with val_batches whole batches cut off their end, or all of them."""
        cut = self.held_out_tail(len(records), batch, path=where, what="image records")
        if cut is None:
            return records, None
        return Window(records, 0, cut), Window(records, cut, len(records) - cut)


def _hashes_to(tokenize: Tokenize, stored: str | None) -> bool:
    """Whether `tokenize` maps text as the tokenizer that hashed to `stored` did (a path spelt otherwise)."""
    fingerprint = getattr(tokenize, "fingerprint", None)
    if stored is None or not callable(fingerprint):
        return False
    try:
        return fingerprint() == stored
    except OSError:  # a tokenizer that cannot load here is not the one the ids came from; refused by name
        return False


def _context_length(tokenize: Tokenize) -> int | None:
    """The ids `tokenize` pads or cuts a caption to: its context_length, else the width it gives "", else None."""
    length = getattr(tokenize, "context_length", None)
    if isinstance(length, int):
        return length
    try:
        ids = tokenize([""])["input_ids"]
        return int(ids.shape[-1])
    except (AttributeError, IndexError, KeyError, TypeError):
        return None

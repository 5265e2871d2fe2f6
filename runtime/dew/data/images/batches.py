"""From stored image records to the batch a model reads: pixels, captions and their token ids.

A source reads a batch of records as their stored fields (encoded image bytes, caption text, token
ids). ImageOrder wraps the global order every spec trains on and finishes each batch in one call:
it knows the global record index of every row, which is what keys the augmentation, so a run resumed
at any record count, on any number of processes, draws the same crop and flip for every record.
"""

from __future__ import annotations

import dataclasses
from collections.abc import Sequence
from typing import Any

import numpy as np

from dew.data import validate
from dew.data.captions import TEXT_FIELDS, Captions
from dew.data.committed_records import VERIFIED, WHERE
from dew.data.images import pixels
from dew.data.order import DecodedOrder, Order, record_rng

# WHERE and VERIFIED mark a source's batch (dew.data.committed_records); ImageOrder removes them.


@dataclasses.dataclass(frozen=True)
class ToPixels:
    """How a stored image becomes image_size × image_size RGB: decode, scale, square, and augment.

    The shorter side is scaled to round(image_size × crop_scale) (INTER_AREA to shrink, LANCZOS4 to
    enlarge, dew.data.images.pixels), and the image_size square is cut from the centre, or, with
    random_crop, at a place drawn per record; flip mirrors half the records left to right. Draws
    happen only when `keys` is given, which the training stream does and validation does not.
    """

    image_size: int
    crop_scale: float = 1.0
    flip: bool = False
    random_crop: bool = False

    def __post_init__(self) -> None:
        validate.positive_int("image_size", self.image_size)
        if not (isinstance(self.crop_scale, int | float) and 1.0 <= self.crop_scale <= 4.0):
            raise ValueError(f"crop_scale must be a number in 1..4, got {self.crop_scale!r}")

    @property
    def scaled(self) -> int:
        """The shorter side an image is scaled to before the square is cut."""
        return max(self.image_size, round(self.image_size * self.crop_scale))

    @property
    def augments(self) -> bool:
        return self.flip or self.random_crop

    def __call__(
        self,
        images: Sequence[bytes],
        where: Sequence[str],
        keys: Sequence[int] | np.ndarray | None = None,
        seed: int = 0,
        verified: Sequence[bool] | None = None,
    ) -> np.ndarray:
        """`verified` marks the records read from checksum-verified committed shards (see VERIFIED)."""
        size = self.image_size
        out = np.empty((len(images), size, size, 3), dtype=np.uint8)
        for row, data in enumerate(images):
            try:
                decoded = pixels.decode_whole_jpeg(data, size=self.scaled) if verified and verified[row] else None
                if decoded is None:
                    decoded = pixels.decode(bytes(data), size=self.scaled)
            except pixels.ImageRejected as error:
                raise ValueError(
                    f"{where[row]}: the image cannot be decoded ({error}); rewrite the shards with the images job, "
                    "which drops and counts such images"
                ) from None
            scaled = pixels.scale_shorter_side(decoded, self.scaled)
            top = left = None
            mirror = False
            if keys is not None and self.augments:
                rng = record_rng(seed, int(keys[row]))
                if self.random_crop:
                    top = int(rng.integers(0, scaled.shape[0] - size + 1))
                    left = int(rng.integers(0, scaled.shape[1] - size + 1))
                mirror = self.flip and bool(rng.random() < 0.5)
            square = pixels.crop(scaled, size, top=top, left=left)
            out[row] = square[:, ::-1] if mirror else square
        return out


class ImageOrder(DecodedOrder):
    """An order whose batches leave decoded: `inner` reads the records, this makes them pixels and text.

    As for every DecodedOrder, a run may go on at another image_size (progressive resizing) and keep
    its place in the data.
    """

    def __init__(self, inner: Order, to_pixels: ToPixels, captions: Captions, *, seed: int, augment: bool) -> None:
        self.inner, self.to_pixels, self.captions = inner, to_pixels, captions
        self.seed, self.augment = seed, augment

    def read(self, ks: np.ndarray) -> dict[str, Any]:
        ks = np.asarray(ks, dtype=np.int64)
        batch = dict(self.inner.read(ks))
        where = batch.pop(WHERE, None) or [f"global record {k}" for k in ks.tolist()]
        verified = batch.pop(VERIFIED, None)
        images = batch.pop("image")
        keys = ks if self.augment else None
        out: dict[str, Any] = {"image": self.to_pixels(images, where, keys, self.seed, verified)}
        text = self.captions.text(batch)
        for name in TEXT_FIELDS if self.captions.stored or self.captions.carried else ():
            batch.pop(name)
        out.update(batch)
        if text is not None:
            out["text"] = text
        return out

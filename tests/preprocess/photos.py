"""Real photographs (skimage.data) encoded here, and the damaged or unusable images a corpus meets."""

from __future__ import annotations

import io

import numpy as np


def encoded(pixels: np.ndarray, fmt: str, mode: str | None = None) -> bytes:
    """`pixels` as a `fmt` (JPEG, PNG, WEBP) file's bytes through Pillow, converted to `mode` first if given."""
    from PIL import Image

    image = Image.fromarray(pixels)
    if mode is not None:
        image = image.convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt in ("JPEG", "WEBP") else {}))
    return buffer.getvalue()


def photo(name: str) -> np.ndarray:
    from skimage import data

    return getattr(data, name)()


def good_images() -> dict[str, bytes]:
    """Photographs of several sizes, colour, grey and RGBA, in every encoding, and CMYK and 16-bit files."""
    grey16 = photo("camera").astype(np.uint16) * 257
    return {
        "astronaut.jpg": encoded(photo("astronaut"), "JPEG"),
        "coffee.png": encoded(photo("coffee"), "PNG"),
        "rocket.webp": encoded(photo("rocket"), "WEBP"),
        "coins.png": encoded(photo("coins"), "PNG"),
        "logo.png": encoded(photo("logo"), "PNG"),
        "chelsea.jpg": encoded(photo("chelsea"), "JPEG", mode="CMYK"),
        "camera16.png": encoded(grey16, "PNG"),
    }


def bad_images() -> dict[str, tuple[bytes, str]]:
    """Images every job must drop, with the reason dew.data.images.pixels gives."""
    jpeg = encoded(photo("astronaut"), "JPEG")
    return {
        "corrupt.jpg": (b"\xff\xd8\xff\xe0 this is no JPEG at all" * 4, "undecodable"),
        "truncated.jpg": (jpeg[: len(jpeg) // 2], "truncated"),
        "empty.png": (b"", "undecodable"),
        "tiny.png": (encoded(photo("astronaut")[:60, :60], "PNG"), "too_small"),
        "banner.jpg": (encoded(photo("astronaut")[:150, :], "JPEG"), "bad_aspect"),
        "flat.png": (encoded(np.full((200, 200, 3), 127, np.uint8), "PNG"), "flat_colour"),
        "hubble.jpg": (encoded(photo("hubble_deep_field"), "JPEG"), "too_many_pixels"),
        "depth.tif": (encoded(photo("camera").astype(np.float32) / 255, "TIFF"), "not_rgb"),
    }


# Passed to the job with bad_images(): hubble_deep_field (1000 × 872) is over it, every good image under.
MAX_PIXELS = 600_000

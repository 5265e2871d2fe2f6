"""Stored pixels to uint8 RGB, a strip at a time, with integer arithmetic and no whole-image temporary.

Every conversion here is pixel by pixel, so a strip gives the rows the whole image would. Alpha is
composited onto white as round(c × a / 255 + 255 × (1 − a / 255)), exactly, in integers: that value is
never a tie (255 is odd), so the float arithmetic dew used before rounds to the same byte for every
(c, a), and one 64 KiB table holds them all. A palette image converts by its own 256 colours, each
converted as a pixel of the image would be (transparency included), so a strip is one table lookup.
16- and 32-bit grey is scaled to 8 bits (not clipped) when any value of the whole image is over 255;
32-bit grey outside 0..65535 has no RGB reading and is dropped as not_rgb, like a float image.
"""

from __future__ import annotations

import functools
from typing import Any

import numpy as np

SIXTEEN = ("I;16", "I;16L", "I;16B")
# The modes with an RGB reading; any other (F, I;32, ...) is dropped as not_rgb before a pixel is decoded.
ALPHA = ("RGBA", "LA", "PA")
READABLE = frozenset(("RGB", "L", "1", "P", "CMYK", "YCbCr", "LAB", "HSV", "I", *SIXTEEN, *ALPHA))


def rejected(detail: str) -> Exception:
    from dew.data.images.pixels import NOT_RGB, ImageRejected

    return ImageRejected(NOT_RGB, detail)


@functools.cache
def _on_white() -> np.ndarray:
    """[a << 8 | c]: channel value c at opacity a composited onto white, rounded to the nearest byte."""
    a, c = np.divmod(np.arange(1 << 16, dtype=np.int64), 256)
    return ((255 * 255 - a * (255 - c) + 127) // 255).astype(np.uint8)


def on_white(colour: np.ndarray, alpha: np.ndarray) -> np.ndarray:
    """uint8 `colour` [..., k] at uint8 opacity `alpha` [..., 1] composited onto white: a new array."""
    index = alpha.astype(np.uint16) << 8
    index = index | colour  # broadcast over the colour channels, uint16
    return _on_white()[index]


def grey_range(low: int, high: int, mode: str) -> bool:
    """Whether grey of this range scales down to 8 bits; refuses 32-bit grey outside 16 bits.

    16-bit grey (a PNG's or TIFF's) is on the format's own 0..65535 scale, so it always does, as libpng
    and OpenCV read it: a dark image stays dark, where guessing from its brightest value turned one
    that peaks at 255 into a bright picture. 32-bit grey ("I") names no range: it scales down only when
    some value is over 255."""
    if mode == "I" and (low < 0 or high > 65535):
        raise rejected(f"32-bit grey holds values {low}..{high}, outside the 0..65535 of any grey image")
    return high > 255 if mode == "I" else True


def grey_rgb(grey: np.ndarray, scale_down: bool) -> np.ndarray:
    """Integer grey [rows, width] (values within 0..65535) as uint8 RGB."""
    narrow = (grey >> 8) if scale_down else grey
    return np.repeat(narrow.astype(np.uint8)[..., None], 3, axis=2)


def palette_rgb(image: Any) -> np.ndarray:
    """[256, 3]: the RGB each index of a loaded palette image reads as, transparency composited."""
    probe = image.crop((0, 0, 256, 1))  # keeps the palette and info; every pixel is overwritten next
    probe.putdata(range(256))
    return rgb(probe).reshape(256, 3)


def rgb(image: Any, *, scale_down: bool | None = None) -> np.ndarray:
    """A loaded Pillow image (or a strip of one) as uint8 RGB. `scale_down` is the whole image's
    decision for 16- and 32-bit grey; None decides from these pixels."""
    mode = image.mode
    if mode not in READABLE:
        raise rejected(f"mode {mode!r} has no RGB reading")
    if mode in (*SIXTEEN, "I"):
        grey = np.asarray(image)
        if scale_down is None or mode == "I":
            low, high = (int(grey.min(initial=0)), int(grey.max(initial=0))) if grey.size else (0, 0)
            decided = grey_range(low, high, mode)
            scale_down = decided if scale_down is None else scale_down
        return grey_rgb(grey.astype(np.uint32), scale_down)
    if mode in ALPHA or (mode == "P" and "transparency" in image.info):
        rgba = np.asarray(image.convert("RGBA"))
        return on_white(rgba[..., :3], rgba[..., 3:])
    if mode == "RGB":
        return np.asarray(image)
    return np.ascontiguousarray(np.asarray(image.convert("RGB")))

"""Decoding with memory bounded by the decoded image, and the flat-colour test in strips.

Pillow keeps an RGB image at 4 bytes a pixel, and `np.asarray` copies it out through `tobytes`, whose
chunks and their join are two more copies: 10 bytes a pixel at the peak for a 3-byte result (a 9000 × 9000
PNG: 0.8 GB). Here Pillow decodes into a numpy buffer dew allocates (the memory sharing Image.frombuffer
uses), sized max(3, stored bytes a pixel) × pixels, and the RGB result is written over the front of that
same buffer strip by strip, behind the rows still to be read: the stored pixels sit at its end, so a
strip's RGB never reaches a row not yet converted. Peak: 4 bytes a pixel for RGB, RGBA and CMYK, 3 for
grey, palette and 16-bit grey, plus one strip. The pixels are those of Pillow's own conversion.

PNG, JPEG, BMP and TIFF are decoded this way, and a still WebP through libwebp into dew's buffer
(webp_buffer: 3 bytes a pixel, 4 with alpha). Other formats (GIF, animated WebP) and modes Pillow
cannot decode into outside memory (bilevel, LA, 32-bit, float) decode into Pillow's own image and are
converted in strips (in_strips): the same pixels, at Pillow's bytes a pixel plus 3 (4 for a GIF).
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dew.data.extras import require

# Pillow mode of the file → (mode it is decoded as into dew's buffer, bytes a pixel). Pillow holds RGB as
# 4 bytes whose last is padding, which is what RGBX names.
_BUFFERED = {
    "RGB": ("RGBX", 4),
    "RGBA": ("RGBA", 4),
    "CMYK": ("CMYK", 4),
    "L": ("L", 1),
    "P": ("P", 1),
    "I;16": ("I;16", 2),
    "I;16L": ("I;16L", 2),
    "I;16B": ("I;16B", 2),
}
# The formats whose Pillow plugins decode straight into the image they are given, palette included, as
# tested pixel for pixel against Pillow's own decode. GIF, for one, builds its frames on images of its own.
_BUFFERED_FORMATS = ("PNG", "JPEG", "BMP", "TIFF")
_SIXTEEN = ("I;16", "I;16L", "I;16B", "I")
# Bytes of stored pixels converted at a time: the only memory beyond the buffer, so part of the constant.
_STRIP_BYTES = 4 << 20


def load_rgb(image: Any, data: bytes | None = None) -> np.ndarray:
    """A just-opened Pillow image (its draft already chosen) decoded to uint8 RGB [height, width, 3],
    C-contiguous. Raises what Pillow's load raises for damaged data. `data`, the bytes it was opened
    from, lets a still WebP decode through libwebp into dew's own buffer (webp_buffer)."""
    width, height = image.size
    if image.format == "WEBP" and data is not None and not getattr(image, "is_animated", False):
        from dew.data.images import webp_buffer

        alpha = image.mode == "RGBA"
        decoded = webp_buffer.decode_rgb(data, width, height, alpha=alpha, strip_bytes=_STRIP_BYTES)
        if decoded is not None:
            return decoded
    plan = _BUFFERED.get(image.mode) if image.format in _BUFFERED_FORMATS else None
    if plan is None or width * height == 0:
        image.load()
        return in_strips(image)
    as_mode, stored = plan
    pixels = width * height
    buffer = np.empty(max(3, stored) * pixels, np.uint8)
    source = buffer[buffer.size - stored * pixels :]
    pil = require("PIL.Image", for_what="decoding images")
    core = pil.frombuffer(as_mode, (width, height), source, "raw", as_mode, 0, 1).im
    mode = image.mode
    image._mode, image.im = as_mode, core
    image.load()
    if image.mode != as_mode or image.im is not core:
        # The plugin decoded elsewhere and replaced the image (a format that decodes before Pillow's tiles do).
        return in_strips(image)
    image._mode = mode if as_mode == "RGBX" else as_mode
    scale_down = bool(source.view(_sixteen_dtype(as_mode)).max(initial=0) > 255) if stored == 2 else None
    out = buffer[: 3 * pixels]
    cv2 = require("cv2", for_what="decoding images") if as_mode == "RGBX" else None
    rows = max(1, _STRIP_BYTES // (stored * width))
    grid = source.reshape(height, width, stored)
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        if cv2 is not None:  # RGBX: OpenCV drops the padding byte many times faster than a strided numpy copy
            strip = cv2.cvtColor(grid[top:bottom], cv2.COLOR_RGBA2RGB)
        else:
            strip = rgb(image.crop((0, top, width, bottom)), scale_down=scale_down)
        out[3 * width * top : 3 * width * bottom] = strip.reshape(-1)
    return out.reshape(height, width, 3)


def in_strips(image: Any) -> np.ndarray:
    """A loaded Pillow image that holds its own pixels, as uint8 RGB converted a strip of rows at a time
    into one array: the peak is Pillow's image, the RGB result and a strip (4 bytes a pixel for palette,
    grey and bilevel images such as GIFs; 7 for an RGB one), not the 10 of a whole conversion's copies.
    Every conversion here is pixel by pixel, so strips give the whole image's pixels; 16-bit grey is
    scaled down by one decision for the whole image, as a whole conversion makes it."""
    width, height = image.size
    if width * height == 0:
        return rgb(image)
    scale_down = bool(image.getextrema()[1] > 255) if image.mode in _SIXTEEN else None
    out = np.empty((height, width, 3), np.uint8)
    rows = max(1, _STRIP_BYTES // (4 * width))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        out[top:bottom] = rgb(image.crop((0, top, width, bottom)), scale_down=scale_down)
    return out


def _sixteen_dtype(mode: str) -> np.dtype:
    return np.dtype(">u2" if mode == "I;16B" else "<u2")


def rgb(image: Any, *, scale_down: bool | None = None) -> np.ndarray:
    """A loaded Pillow image as uint8 RGB. 16-bit grey is scaled to 8 bits (not clipped) when any value
    is over 255 (`scale_down` says so for a strip of a larger image); alpha is composited onto white."""
    from dew.data.images.pixels import NOT_RGB, ImageRejected

    mode = image.mode
    if mode in _SIXTEEN:
        grey: np.ndarray = np.asarray(image).astype(np.uint32)
        if scale_down is None:
            scale_down = bool(grey.max(initial=0) > 255)
        grey = (grey >> 8) if scale_down else grey
        return np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info):
        rgba = np.asarray(image.convert("RGBA")).astype(np.float32)
        alpha = rgba[..., 3:] / 255.0
        return np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)
    if mode == "RGB":
        return np.asarray(image)
    if mode in ("L", "1", "P", "CMYK", "YCbCr", "LAB", "HSV"):
        return np.ascontiguousarray(np.asarray(image.convert("RGB")))
    raise ImageRejected(NOT_RGB, f"mode {mode!r} has no RGB reading")


# Pixels compared or summed at a time by the flat-colour test.
_STRIP_PIXELS = 1 << 18


def is_flat(pixels: np.ndarray, bound: float) -> bool:
    """Whether every channel's population standard deviation is under `bound` (> 0): at any bound a
    single pixel can decide (2 × pixels × bound² ≤ 1, the default 1e-5 included), whether every pixel
    is the same RGB triple. Works a strip of rows at a time on the uint8 pixels, and stops at the first
    strip that settles it, so it costs no more memory than a strip and a photograph one strip's work."""
    height, width = pixels.shape[:2]
    count = height * width
    if count == 0:
        return True
    rows = max(1, _STRIP_PIXELS // width)
    first = pixels[0, 0].copy()
    # Two values a and b of one channel make its variance at least (b - a)² / 2n, so any pixel unlike
    # the first already proves a channel deviates this much.
    if 2.0 * count * bound * bound <= 1.0:
        # Strips from one row up, doubling: a photograph differs from its first pixel within a row or two.
        top, rows = 0, 1
        while top < height:
            if not (pixels[top : top + rows] == first).all():
                return False
            top, rows = top + rows, min(2 * rows, max(1, _STRIP_PIXELS // width))
        return True
    low, high = first.astype(np.int64), first.astype(np.int64)
    sums, squares = np.zeros(3, np.int64), np.zeros(3, np.int64)
    for top in range(0, height, rows):
        strip = pixels[top : top + rows].reshape(-1, 3)
        low, high = np.minimum(low, strip.min(axis=0)), np.maximum(high, strip.max(axis=0))
        if (((high - low) ** 2) >= 2.0 * count * bound * bound).any():
            return False
        offsets = strip.astype(np.int32) - first.astype(np.int32)  # small numbers: exact sums in int64
        sums += offsets.sum(axis=0, dtype=np.int64)
        squares += (offsets * offsets).sum(axis=0, dtype=np.int64)
    # Variance times n², in exact integers: n Σd² - (Σd)².
    spread = [count * int(q) - int(s) * int(s) for q, s in zip(squares, sums, strict=True)]
    return all(value < bound * bound * count * count for value in spread)

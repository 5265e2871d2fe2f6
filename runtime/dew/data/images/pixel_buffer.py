"""Decoding with memory bounded by the decoded image, and the flat-colour test in strips.

Pillow keeps an RGB image at 4 bytes a pixel, and `np.asarray` copies it out through `tobytes`, whose
chunks and their join are two more copies: 10 bytes a pixel at the peak for a 3-byte result (a 9000 × 9000
PNG: 0.8 GB). Here Pillow decodes into a numpy buffer dew allocates (Pillow's map_buffer, the memory
sharing Image.frombuffer uses), sized max(3, stored bytes a pixel) × pixels, and the RGB result is written
over the front of that same buffer strip by strip, behind the rows still to be read: the stored pixels
sit at its end, so a strip's RGB never reaches a row not yet converted. Strips are sized by the RGB they
write, and converted by rgb_strips in integers. Peak: 4 bytes a pixel for RGB, RGBA, CMYK, grey with
alpha and 32-bit grey, 3 for grey, palette (with transparency too) and 16-bit grey, plus one strip's
work. The pixels are those of Pillow's own conversion, alpha composited onto white.

PNG, JPEG, BMP and TIFF are decoded this way, and a WebP through libwebp into dew's buffer (webp_buffer:
3 bytes a pixel, 4 with alpha; an animation's first frame alone). Other formats (GIF) and modes (bilevel)
decode into Pillow's own image and are converted in strips (in_strips): the same pixels, at Pillow's
bytes a pixel plus 3 (4 for a GIF). A mode with no RGB reading (float, 32-bit of other kinds) is dropped
as not_rgb before any pixel is decoded.
"""

from __future__ import annotations

from typing import Any

import numpy as np

from dew.data.extras import require
from dew.data.images import rgb_strips

# Pillow mode of the file → (mode it is decoded as into dew's buffer, bytes a pixel). Pillow holds RGB as
# 4 bytes whose last is padding, which is what RGBX names; LA as L, L, L, A; I as one native int32.
_BUFFERED = {
    "RGB": ("RGBX", 4),
    "RGBA": ("RGBA", 4),
    "CMYK": ("CMYK", 4),
    "LA": ("LA", 4),
    "I": ("I", 4),
    "L": ("L", 1),
    "P": ("P", 1),
    "I;16": ("I;16", 2),
    "I;16L": ("I;16L", 2),
    "I;16B": ("I;16B", 2),
}
# The formats whose Pillow plugins decode straight into the image they are given, palette included, as
# tested pixel for pixel against Pillow's own decode. GIF, for one, builds its frames on images of its own.
_BUFFERED_FORMATS = ("PNG", "JPEG", "BMP", "TIFF")
# Bytes of RGB written a strip at a time; a strip's work is a few times this, all of it in the constant.
_STRIP_BYTES = 4 << 20


def load_rgb(image: Any, data: bytes | None = None) -> np.ndarray:
    """A just-opened Pillow image (its draft already chosen) decoded to uint8 RGB [height, width, 3],
    C-contiguous. Raises what Pillow's load raises for damaged data, and not_rgb for a mode with no RGB
    reading before decoding it. `data`, the bytes it was opened from, lets a WebP decode through libwebp
    into dew's own buffer (webp_buffer)."""
    width, height = image.size
    if image.mode not in rgb_strips.READABLE:
        raise rgb_strips.rejected(f"the image is stored as {image.mode!r}, which has no RGB reading")
    if image.format == "WEBP" and data is not None:
        decoded = webp_rgb(data, width, height, alpha=image.mode == "RGBA")
        if decoded is not None:
            return decoded
    plan = _BUFFERED.get(image.mode) if image.format in _BUFFERED_FORMATS else None
    pil = require("PIL.Image", for_what="decoding images")
    if plan is None or width * height == 0 or not hasattr(pil.core, "map_buffer"):
        image.load()
        return in_strips(image)
    as_mode, stored = plan
    pixels = width * height
    buffer = np.empty(max(3, stored) * pixels, np.uint8)
    source = buffer[buffer.size - stored * pixels :]
    core = pil.core.map_buffer(source, (width, height), "raw", 0, (as_mode, 0, 1))
    mode = image.mode
    image._mode, image.im = as_mode, core
    image.load()
    if image.mode != as_mode or image.im is not core:
        # The plugin decoded elsewhere and replaced the image (a format that decodes before Pillow's tiles do).
        return in_strips(image)
    image._mode = mode if as_mode == "RGBX" else as_mode
    convert = _converter(image, as_mode, source.reshape(height, width, stored))
    out = buffer[: 3 * pixels]
    rows = max(1, _STRIP_BYTES // (3 * width))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        # Each strip's RGB is computed whole before it is written, so it never overwrites a row it reads.
        out[3 * width * top : 3 * width * bottom] = convert(top, bottom).reshape(-1)
    return out.reshape(height, width, 3)


def webp_rgb(data: bytes, width: int, height: int, *, alpha: bool) -> np.ndarray | None:
    """The WebP in `data` decoded by libwebp into dew's own buffer (webp_buffer), or None."""
    from dew.data.images import webp_buffer

    return webp_buffer.decode_rgb(data, width, height, alpha=alpha, strip_bytes=_STRIP_BYTES)


def _converter(image: Any, mode: str, grid: np.ndarray) -> Any:
    """(top, bottom) → that strip of the stored pixels `grid` [height, width, bytes] as uint8 RGB."""
    if mode == "RGBX":  # OpenCV drops the padding byte many times faster than a strided numpy copy
        cv2 = require("cv2", for_what="decoding images")
        return lambda top, bottom: cv2.cvtColor(grid[top:bottom], cv2.COLOR_RGBA2RGB)
    if mode == "RGBA":
        return lambda top, bottom: rgb_strips.on_white(grid[top:bottom, :, :3], grid[top:bottom, :, 3:])
    if mode == "LA":
        return lambda top, bottom: np.repeat(
            rgb_strips.on_white(grid[top:bottom, :, :1], grid[top:bottom, :, 3:]), 3, 2
        )
    if mode == "L":
        return lambda top, bottom: np.repeat(grid[top:bottom], 3, axis=2)
    if mode == "P":
        colours = rgb_strips.palette_rgb(image)  # read before any strip is written over the buffer
        return lambda top, bottom: colours[grid[top:bottom, :, 0]]
    if mode in (*rgb_strips.SIXTEEN, "I"):
        dtype = np.dtype(">u2" if mode == "I;16B" else "<u2" if mode in rgb_strips.SIXTEEN else "=i4")
        grey = grid.view(dtype)[..., 0]
        scale_down = rgb_strips.grey_range(int(grey.min()), int(grey.max()), mode)
        return lambda top, bottom: rgb_strips.grey_rgb(grey[top:bottom], scale_down)
    width = grid.shape[1]  # CMYK: Pillow's own conversion, a strip at a time
    return lambda top, bottom: rgb_strips.rgb(image.crop((0, top, width, bottom)))


def in_strips(image: Any) -> np.ndarray:
    """A loaded Pillow image that holds its own pixels, as uint8 RGB converted a strip of rows at a time
    into one array: the peak is Pillow's image, the RGB result and a strip (4 bytes a pixel for palette,
    grey and bilevel images such as GIFs), not the 10 of a whole conversion's copies. 16- and 32-bit grey
    is scaled down by one decision for the whole image, as a whole conversion makes it."""
    width, height = image.size
    if width * height == 0:
        return rgb(image)
    scale_down = None
    if image.mode in (*rgb_strips.SIXTEEN, "I"):
        low, high = image.getextrema()
        scale_down = rgb_strips.grey_range(int(low), int(high), image.mode)
    out = np.empty((height, width, 3), np.uint8)
    # A strip is copied out of Pillow's image and converted through RGBA at worst: a few copies of it.
    rows = max(1, _STRIP_BYTES // (4 * 3 * width))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        out[top:bottom] = rgb(image.crop((0, top, width, bottom)), scale_down=scale_down)
    return out


rgb = rgb_strips.rgb


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

"""WebP decoded by libwebp straight into a buffer dew owns, so its memory is bounded like PNG's and JPEG's.

Pillow decodes a WebP through libwebp's animation decoder into a frame of its own, then copies that
frame into its image (4 bytes a pixel) and `np.asarray` copies it again: about 11 bytes a pixel at the
peak. Here libwebp's simple decoder writes RGB (3 bytes a pixel) into a numpy buffer, or RGBA (4) that
is composited onto white over the front of the same buffer a strip at a time, as pixel_buffer does.
The library is the libwebp Pillow itself loads (its wheel bundles it), found by ctypes; where none is
found, or for an animated WebP (the simple decoder reads stills only), the caller decodes through
Pillow as before. The pixels equal Pillow's (tested), since both run libwebp's default decoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
from typing import Any

import numpy as np

_lib: Any = None
_tried = False


def _libwebp() -> Any:
    global _lib, _tried
    if not _tried:
        _tried = True
        import PIL

        bundled = os.path.join(os.path.dirname(PIL.__file__), os.pardir, "pillow.libs", "libwebp-*.so*")
        found = sorted(glob.glob(bundled)) or [name for name in [ctypes.util.find_library("webp")] if name]
        try:
            lib = ctypes.CDLL(found[0]) if found else None
        except OSError:
            lib = None
        if lib is not None:
            size = ctypes.c_size_t
            data, out = ctypes.c_char_p, ctypes.POINTER(ctypes.c_uint8)
            lib.WebPGetInfo.argtypes = [data, size, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
            lib.WebPGetInfo.restype = ctypes.c_int
            for name in ("WebPDecodeRGBInto", "WebPDecodeRGBAInto"):
                function = getattr(lib, name)
                function.argtypes = [data, size, out, size, ctypes.c_int]
                function.restype = out
        _lib = lib
    return _lib


def decode_rgb(data: bytes, width: int, height: int, *, alpha: bool, strip_bytes: int) -> np.ndarray | None:
    """The still WebP in `data` (`width` × `height`, as Pillow opened it) as uint8 RGB [height, width, 3],
    alpha composited onto white; None where libwebp is not reachable or refuses the bytes (the caller's
    Pillow decode then names the damage)."""
    lib = _libwebp()
    if lib is None or width * height == 0:
        return None
    w, h = ctypes.c_int(), ctypes.c_int()
    if not lib.WebPGetInfo(data, len(data), ctypes.byref(w), ctypes.byref(h)) or (w.value, h.value) != (width, height):
        return None
    stored = 4 if alpha else 3
    pixels = width * height
    buffer = np.empty(stored * pixels, np.uint8)
    into = lib.WebPDecodeRGBAInto if alpha else lib.WebPDecodeRGBInto
    target = buffer.ctypes.data_as(ctypes.POINTER(ctypes.c_uint8))
    if not into(data, len(data), target, buffer.size, stored * width):
        return None
    if not alpha:
        return buffer.reshape(height, width, 3)
    grid, out = buffer.reshape(height, width, 4), buffer[: 3 * pixels]
    rows = max(1, strip_bytes // (4 * width))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        # The strip is copied out before its RGB is written, which ends before the next strip's RGBA begins.
        rgba = grid[top:bottom].astype(np.float32)
        opacity = rgba[..., 3:] / 255.0
        strip = np.rint(rgba[..., :3] * opacity + 255.0 * (1.0 - opacity)).astype(np.uint8)
        out[3 * width * top : 3 * width * bottom] = strip.reshape(-1)
    return out.reshape(height, width, 3)

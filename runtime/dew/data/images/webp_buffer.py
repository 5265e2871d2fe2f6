"""WebP decoded by libwebp straight into a buffer dew owns, so its memory is bounded like PNG's and JPEG's.

Pillow decodes a WebP through libwebp's animation decoder into a frame of its own, then copies that
frame into its image (4 bytes a pixel) and `np.asarray` copies it again: about 11 bytes a pixel at the
peak, and 17 for an animation, whose decoder keeps canvases of its own. Here libwebp's simple decoder
writes RGB (3 bytes a pixel) into a numpy buffer, or RGBA (4) that is composited onto white over the
front of the same buffer a strip at a time, as pixel_buffer does. An animation is read as its first
frame, which is all dew keeps of one: that frame's bitstream is cut out of its ANMF chunk (and its ALPH
chunk with it) into a still WebP of its own, when it covers the whole canvas. The animation decoder
draws a first frame onto a cleared canvas without blending, so that still's pixels are the ones Pillow
gives. The library is the libwebp Pillow itself loads (its wheel bundles it), found by ctypes; where none
is found, or for a first frame smaller than its canvas, the caller decodes through Pillow as before.
The pixels equal Pillow's (tested), since both run libwebp's default decoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import struct
from typing import Any

import numpy as np

from dew.data.images import rgb_strips

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
    """The WebP in `data` (`width` × `height`, as Pillow opened it; an animation's first frame) as uint8
    RGB [height, width, 3], alpha composited onto white; None where libwebp is not reachable or refuses
    the bytes (the caller's Pillow decode then names the damage)."""
    lib = _libwebp()
    if lib is None or width * height == 0:
        return None
    if len(data) > 20 and data[12:16] == b"VP8X" and data[20] & _ANIMATED:
        first = first_frame(data, width, height)
        if first is None:
            return None
        data = first
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
        # The strip's RGB is computed whole before it is written, which ends before the next strip's RGBA begins.
        strip = rgb_strips.on_white(grid[top:bottom, :, :3], grid[top:bottom, :, 3:])
        out[3 * width * top : 3 * width * bottom] = strip.reshape(-1)
    return out.reshape(height, width, 3)


_ANIMATED, _ALPHA = 0x02, 0x10  # VP8X flags


def _chunks(data: bytes, at: int, end: int) -> list[tuple[bytes, int, int]]:
    """(fourcc, payload start, payload end) of each RIFF chunk in data[at:end]; [] where one runs past the end."""
    found = []
    while at + 8 <= end:
        size = struct.unpack_from("<I", data, at + 4)[0]
        if at + 8 + size > end:
            return []
        found.append((data[at : at + 4], at + 8, at + 8 + size))
        at += 8 + size + (size & 1)  # chunks are padded to an even size
    return found


def _chunk(fourcc: bytes, payload: bytes) -> bytes:
    return fourcc + struct.pack("<I", len(payload)) + payload + b"\0" * (len(payload) & 1)


def first_frame(data: bytes, width: int, height: int) -> bytes | None:
    """The first frame of an animated WebP as a still WebP of its own, or None unless that frame lies at
    (0, 0) and is `width` × `height`, the whole canvas (or the file is not one this reads)."""
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    frame = next(((a, b) for name, a, b in _chunks(data, 12, len(data)) if name == b"ANMF"), None)
    if frame is None or frame[1] - frame[0] < 16:
        return None
    at = frame[0]
    x, y, w, h = (int.from_bytes(data[at + 3 * i : at + 3 * i + 3], "little") for i in range(4))
    if (x, y, w + 1, h + 1) != (0, 0, width, height):
        return None
    inner = {name: data[a:b] for name, a, b in reversed(_chunks(data, at + 16, frame[1]))}  # the first of each
    if b"VP8 " in inner:
        if b"ALPH" not in inner:
            body = _chunk(b"VP8 ", inner[b"VP8 "])
        else:
            header = bytes([_ALPHA, 0, 0, 0]) + (width - 1).to_bytes(3, "little") + (height - 1).to_bytes(3, "little")
            body = _chunk(b"VP8X", header) + _chunk(b"ALPH", inner[b"ALPH"]) + _chunk(b"VP8 ", inner[b"VP8 "])
    elif b"VP8L" in inner:
        body = _chunk(b"VP8L", inner[b"VP8L"])
    else:
        return None
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body

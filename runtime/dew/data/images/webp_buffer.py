"""WebP decoded by libwebp straight into a buffer dew owns, so its memory is bounded like PNG's and JPEG's.

Pillow decodes a WebP through libwebp's animation decoder into a frame of its own, then copies that
frame into its image (4 bytes a pixel) and `np.asarray` copies it again: about 11 bytes a pixel at the
peak, and 17 for an animation, whose decoder keeps canvases of its own. Here libwebp's simple decoder
writes RGB (3 bytes a pixel) into a numpy buffer, or RGBA (4) that is composited onto white over the
front of the same buffer a strip at a time, as pixel_buffer does. An animation is read as its first
frame, which is all dew keeps of one: libwebp decodes that frame's chunks (an ALPH and a VP8 chunk, or
a VP8 or VP8L one) where they lie in the file's own bytes, as its animation decoder does, without a copy.
That decoder draws a first frame onto a canvas cleared to transparent black, at the frame's place and
without blending (the background colour and the blend and dispose bits play no part in it); so does
this, into a canvas-sized buffer of zeros when the frame is smaller than its canvas, and libwebp writes
the frame's rows at the canvas's stride. The library is the libwebp Pillow itself loads (its wheel
bundles it), found by ctypes; where none is found, the caller decodes through Pillow as before.
The pixels equal Pillow's (tested), since both run libwebp's default decoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import os
import struct
from typing import Any, NamedTuple

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
            data, out = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8)  # data: an address within the file's bytes
            lib.WebPGetInfo.argtypes = [data, size, ctypes.POINTER(ctypes.c_int), ctypes.POINTER(ctypes.c_int)]
            lib.WebPGetInfo.restype = ctypes.c_int
            for name in ("WebPDecodeRGBInto", "WebPDecodeRGBAInto"):
                function = getattr(lib, name)
                function.argtypes = [data, size, out, size, ctypes.c_int]
                function.restype = out
        _lib = lib
    return _lib


class Frame(NamedTuple):
    """An animation's first frame: its bitstream data[start:end] (an ALPH chunk and a VP8 one, or a
    VP8 or VP8L chunk alone, as libwebp's animation decoder hands them to its decoder) and where it lies."""

    start: int
    end: int
    x: int
    y: int
    width: int
    height: int


def decode_rgb(data: bytes, width: int, height: int, *, alpha: bool, strip_bytes: int) -> np.ndarray | None:
    """The WebP in `data` (`width` × `height`, as Pillow opened it; an animation's first frame on its
    canvas) as uint8 RGB [height, width, 3], alpha composited onto white; None where libwebp is not
    reachable or refuses the bytes (the caller's Pillow decode then names the damage). A first frame
    that does not lie within its canvas is rejected as undecodable, as Pillow refuses it."""
    lib = _libwebp()
    if lib is None or width * height == 0:
        return None
    frame = Frame(0, len(data), 0, 0, width, height)
    if len(data) > 20 and data[12:16] == b"VP8X" and data[20] & _ANIMATED:
        found = first_frame(data)
        if found is None:
            return None
        frame = found
        if frame.x + frame.width > width or frame.y + frame.height > height:
            from dew.data.images.pixels import UNDECODABLE, ImageRejected

            place = f"{frame.width}x{frame.height} at ({frame.x}, {frame.y})"
            raise ImageRejected(UNDECODABLE, f"the first frame, {place}, is outside its {width}x{height} canvas")
    source = np.frombuffer(data, np.uint8)  # libwebp reads the file's own bytes: no copy of the frame
    at, size = source.ctypes.data + frame.start, frame.end - frame.start
    w, h = ctypes.c_int(), ctypes.c_int()
    if not lib.WebPGetInfo(at, size, ctypes.byref(w), ctypes.byref(h)) or (w.value, h.value) != frame[4:]:
        return None
    stored = 4 if alpha else 3
    # A frame smaller than its canvas is drawn on a canvas cleared to transparent black, as libwebp's
    # animation decoder draws a first frame (its background colour and blend bits play no part).
    whole = frame[4:] == (width, height)
    buffer = (np.empty if whole else np.zeros)(stored * width * height, np.uint8)
    offset = stored * (frame.y * width + frame.x)
    into = lib.WebPDecodeRGBAInto if alpha else lib.WebPDecodeRGBInto
    target = ctypes.cast(buffer.ctypes.data + offset, ctypes.POINTER(ctypes.c_uint8))
    if not into(at, size, target, buffer.size - offset, stored * width):
        return None
    if not alpha:
        return buffer.reshape(height, width, 3)
    return _on_white_in_place(buffer, width, height, strip_bytes)


def _on_white_in_place(buffer: np.ndarray, width: int, height: int, strip_bytes: int) -> np.ndarray:
    """The RGBA `buffer` (height × width × 4) composited onto white as RGB over its own front."""
    grid, out = buffer.reshape(height, width, 4), buffer[: 3 * width * height]
    rows = max(1, strip_bytes // (4 * width))
    for top in range(0, height, rows):
        bottom = min(height, top + rows)
        # The strip's RGB is computed whole before it is written, which ends before the next strip's RGBA begins.
        strip = rgb_strips.on_white(grid[top:bottom, :, :3], grid[top:bottom, :, 3:])
        out[3 * width * top : 3 * width * bottom] = strip.reshape(-1)
    return out.reshape(height, width, 3)


_ANIMATED = 0x02  # a VP8X flag


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


def first_frame(data: bytes) -> Frame | None:
    """The first frame of an animated WebP, or None where the file is not one this reads. Its chunks
    are read as libwebp's demuxer reads them: an ALPH chunk and then a VP8 one, or a VP8 or VP8L
    chunk, from the start of the ANMF chunk's frame data."""
    if data[:4] != b"RIFF" or data[8:12] != b"WEBP":
        return None
    anmf = next(((a, b) for name, a, b in _chunks(data, 12, len(data)) if name == b"ANMF"), None)
    if anmf is None or anmf[1] - anmf[0] < 16:
        return None
    at = anmf[0]
    x, y, w, h = (int.from_bytes(data[at + 3 * i : at + 3 * i + 3], "little") for i in range(4))
    names = [(name, end) for name, _, end in _chunks(data, at + 16, anmf[1])[:2]]
    if names[:1] and names[0][0] in (b"VP8 ", b"VP8L"):
        end = names[0][1]
    elif [name for name, _ in names] == [b"ALPH", b"VP8 "]:
        end = names[1][1]
    else:
        return None
    return Frame(at + 16, end, 2 * x, 2 * y, w + 1, h + 1)  # offsets are stored halved, sizes less one

"""WebP opened and decoded by libwebp straight into a buffer dew owns, so its memory is bounded like PNG's and JPEG's.

Pillow opens a WebP by copying the whole file for its animation decoder (as many bytes again as the
file holds), decodes it into a frame of its own, copies that frame into its image (4 bytes a pixel) and
`np.asarray` copies it again: about 11 bytes a pixel at the peak, and 17 for an animation. Here the file
is opened where its bytes lie (`opened`: libwebp's demuxer, which Pillow's open runs, gives the size, and
its features the mode), and libwebp's simple decoder writes RGB (3 bytes a pixel) into a numpy buffer.
An image with alpha is decoded as RGBA by libwebp's incremental decoder into an anonymous mapping, a step
of the bitstream at a time, and composited onto white over the mapping's front a strip at a time as its
rows come out; the RGBA behind the RGB goes back to the system, so the peak is the RGB, the rows not yet
composited and what libwebp holds itself (a lossy image's alpha plane, 1 byte a pixel; a lossless
image's whole ARGB, 4). An animation is read as its first frame, which is all dew keeps of one: libwebp
decodes that frame's chunks (an ALPH and a VP8 chunk, or a VP8 or VP8L one) where they lie in the
file's own bytes, as its animation decoder does, without a copy. That decoder draws a first frame onto
a canvas cleared to transparent black, at the frame's place and without blending (the background
colour and the blend and dispose bits play no part in it); so does this, into a canvas-sized buffer of
zeros when the frame is smaller than its canvas, and libwebp writes the frame's rows at the canvas's
stride. The library is the libwebp Pillow itself loads (its wheel bundles it, and libwebpdemux), found
by ctypes; where none is found, the caller opens and decodes through Pillow as before. The pixels equal
Pillow's (tested), since both run libwebp's default decoder.
"""

from __future__ import annotations

import ctypes
import ctypes.util
import glob
import mmap
import os
import struct
from typing import Any, NamedTuple

import numpy as np

from dew.data.images import rgb_strips

_libs: dict[str, Any] = {}

# The ABI versions of libwebp 1.x's decode.h and demux.h: a library checks only their major byte.
_DECODER_ABI, _DEMUX_ABI = 0x0209, 0x0107
_MODE_RGBA = 1  # WEBP_CSP_MODE
_OK, _SUSPENDED = 0, 5  # VP8StatusCode
_CANVAS_WIDTH, _CANVAS_HEIGHT = 1, 2  # WebPFormatFeature


class _Data(ctypes.Structure):
    _fields_ = [("bytes", ctypes.c_void_p), ("size", ctypes.c_size_t)]


class _Features(ctypes.Structure):
    _fields_ = [(name, ctypes.c_int) for name in ("width", "height", "has_alpha", "has_animation", "format")]
    _fields_ += [("pad", ctypes.c_uint32 * 5)]


def _load(name: str) -> Any:
    """Pillow's bundled lib`name` (libwebp or libwebpdemux, which links that same libwebp), else the system's."""
    import PIL

    bundled = os.path.join(os.path.dirname(PIL.__file__), os.pardir, "pillow.libs", f"lib{name}-*.so*")
    found = sorted(glob.glob(bundled)) or [path for path in [ctypes.util.find_library(name)] if path]
    try:
        return ctypes.CDLL(found[0]) if found else None
    except OSError:
        return None


def _libwebp() -> Any:
    if "webp" not in _libs:
        lib = _libs["webp"] = _load("webp")
        if lib is not None:
            size, c_int = ctypes.c_size_t, ctypes.c_int
            data, out = ctypes.c_void_p, ctypes.POINTER(ctypes.c_uint8)  # data: an address within the file's bytes
            int_out = ctypes.POINTER(c_int)
            lib.WebPGetInfo.argtypes = [data, size, int_out, int_out]
            lib.WebPGetInfo.restype = c_int
            lib.WebPGetFeaturesInternal.argtypes = [data, size, ctypes.POINTER(_Features), c_int]
            lib.WebPGetFeaturesInternal.restype = c_int
            lib.WebPDecodeRGBInto.argtypes = [data, size, out, size, c_int]
            lib.WebPDecodeRGBInto.restype = out
            lib.WebPINewRGB.argtypes = [c_int, ctypes.c_void_p, size, c_int]
            lib.WebPINewRGB.restype = ctypes.c_void_p
            lib.WebPIUpdate.argtypes = [ctypes.c_void_p, data, size]
            lib.WebPIUpdate.restype = c_int
            lib.WebPIDecGetRGB.argtypes = [ctypes.c_void_p, int_out, int_out, int_out, int_out]
            lib.WebPIDecGetRGB.restype = ctypes.c_void_p
            lib.WebPIDelete.argtypes = [ctypes.c_void_p]
            lib.WebPIDelete.restype = None
    return _libs["webp"]


def _libwebpdemux() -> Any:
    if "webpdemux" not in _libs:
        demux = _libs["webpdemux"] = _load("webpdemux")
        if demux is not None:
            pointer = ctypes.c_void_p
            demux.WebPDemuxInternal.argtypes = [ctypes.POINTER(_Data), ctypes.c_int, pointer, ctypes.c_int]
            demux.WebPDemuxInternal.restype = pointer
            demux.WebPDemuxGetI.argtypes = [pointer, ctypes.c_int]
            demux.WebPDemuxGetI.restype = ctypes.c_uint32
            demux.WebPDemuxDelete.argtypes = [pointer]
            demux.WebPDemuxDelete.restype = None
    return _libs["webpdemux"]


def opened(data: bytes) -> tuple[int, int, bool] | None:
    """(width, height, alpha) of the WebP in `data` as Pillow opens it, read where the bytes lie: Pillow's
    open copies the whole file for its animation decoder (as many bytes again as the file holds, 3 a pixel
    for a lossless photograph). Pillow's open accepts what libwebp's demuxer accepts, sized as its canvas,
    and reads alpha where libwebp's features say so (RGBA where they cannot be read). None where either
    library is not reachable or the demuxer refuses the bytes: Pillow's open then names why."""
    lib, demux = _libwebp(), _libwebpdemux()
    if lib is None or demux is None or not data:
        return None
    source = np.frombuffer(data, np.uint8)
    webp = _Data(source.ctypes.data, len(data))
    demuxer = demux.WebPDemuxInternal(ctypes.byref(webp), 0, None, _DEMUX_ABI)
    if not demuxer:
        return None
    try:
        width, height = (demux.WebPDemuxGetI(demuxer, feature) for feature in (_CANVAS_WIDTH, _CANVAS_HEIGHT))
    finally:
        demux.WebPDemuxDelete(demuxer)
    features = _Features()
    read = lib.WebPGetFeaturesInternal(webp.bytes, webp.size, ctypes.byref(features), _DECODER_ABI) == _OK
    return width, height, bool(features.has_alpha) or not read


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
    if alpha:
        return _on_white_as_decoded(lib, (at, size), frame, width, height, strip_bytes)
    # A frame smaller than its canvas is drawn on a canvas cleared to transparent black, as libwebp's
    # animation decoder draws a first frame (its background colour and blend bits play no part).
    buffer = (np.empty if frame[4:] == (width, height) else np.zeros)(3 * width * height, np.uint8)
    offset = 3 * (frame.y * width + frame.x)
    target = ctypes.cast(buffer.ctypes.data + offset, ctypes.POINTER(ctypes.c_uint8))
    if not lib.WebPDecodeRGBInto(at, size, target, buffer.size - offset, 3 * width):
        return None
    return buffer.reshape(height, width, 3)


def _on_white_as_decoded(
    lib: Any, bitstream: tuple[int, int], frame: Frame, width: int, height: int, strip_bytes: int
) -> np.ndarray | None:
    """The frame decoded as RGBA by libwebp's incremental decoder into a canvas-sized anonymous mapping,
    and composited onto white as RGB over the mapping's front a strip at a time as its rows come out.
    The bitstream is handed over a step at a time, in place, so rows arrive while it decodes; the RGBA
    rows already composited, behind the RGB, go back to the system. The mapping's pages are zeros until
    written (transparent black where a frame smaller than its canvas leaves it), and resident only then:
    at the peak, the RGB so far and the rows decoded but not yet composited."""
    at, size = bitstream
    total = 4 * width * height
    mapping = mmap.mmap(-1, total)
    buffer = np.frombuffer(mapping, np.uint8)
    grid, out = buffer.reshape(height, width, 4), buffer[: 3 * width * height]
    offset = 4 * (frame.y * width + frame.x)
    decoder = lib.WebPINewRGB(_MODE_RGBA, buffer.ctypes.data + offset, total - offset, 4 * width)
    if not decoder:
        return None
    rows, done, fed, step = max(1, strip_bytes // (4 * width)), 0, 0, _FIRST_STEP
    try:
        while True:
            fed = min(size, fed + step)
            status = lib.WebPIUpdate(decoder, at, fed)
            if status not in (_OK, _SUSPENDED) or (status == _SUSPENDED and fed == size):
                return None  # damaged or cut short: the caller's Pillow decode names it
            last = ctypes.c_int(0)
            lib.WebPIDecGetRGB(decoder, ctypes.byref(last), None, None, None)
            ready = height if status == _OK else frame.y + last.value
            # Steps grow while they bring less than a strip of rows (to a bound: an alpha plane stored
            # whole before the colour brings none), and shrink once they bring more.
            if ready - done < rows // 2:
                step = min(2 * step, max(_FIRST_STEP, strip_bytes // 4))
            elif ready - done > rows:
                step = max(_FIRST_STEP, step // 2)
            for top in range(done, ready, rows):
                bottom = min(ready, top + rows)
                # A strip's RGB is computed whole before it is written, ending before the next strip's RGBA.
                strip = rgb_strips.on_white(grid[top:bottom, :, :3], grid[top:bottom, :, 3:])
                out[3 * width * top : 3 * width * bottom] = strip.reshape(-1)
            done = ready
            # The RGBA rows composited lie behind the RGB's end: whole pages of them are returned.
            start, end = -(-3 * width * done // mmap.PAGESIZE) * mmap.PAGESIZE, 4 * width * done
            end -= end % mmap.PAGESIZE
            if end > start:
                mapping.madvise(mmap.MADV_DONTNEED, start, end - start)
            if status == _OK:
                return out.reshape(height, width, 3)
    finally:
        lib.WebPIDelete(decoder)


# Bytes of the bitstream handed to the incremental decoder at first; later steps adapt to the strip.
_FIRST_STEP = 1 << 14


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

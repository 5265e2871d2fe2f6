"""JPEGs whose scan ends early, refused: libjpeg's warnings read through simplejpeg's strict decode.

A JPEG whose entropy-coded data stops before its last MCU but still ends with an end-of-image marker
(a cut-off download with the marker re-appended, or a header that claims more rows than the scan holds)
decodes under Pillow and OpenCV without an error: libjpeg paints the missing MCUs grey and only warns
("Corrupt JPEG data: premature end of data segment"), and neither binding passes the warning on.
simplejpeg (libjpeg-turbo's TurboJPEG API) raises it instead when decoding with strict=True.

The check is the decode itself, so it costs nothing more: simplejpeg gives the pixels Pillow gives, bit
for bit (both libjpeg-turbo with its default islow IDCT and fancy upsampling), at the DCT scale Pillow's
draft mode picks, straight into a 3-byte-a-pixel array. A truncation warning is `truncated`. Any other
warning ("N extraneous bytes before marker 0xd9", which real web JPEGs often carry, a bad ICC segment),
a JPEG simplejpeg cannot read, or a result of another shape is left to Pillow, as before. So is the
colour conversion of a CMYK JPEG, which is Pillow's own: such a file is checked by a strict decode at
the smallest scale first (an entropy decode of every MCU, about half a full decode's time).

The strict decode stops at the first warning, so a harmless one could hide a truncation behind it.
Stray bytes between the header's segments, the usual such warning, are taken out of a copy that is
checked again (Pillow still decodes the file as it came); what stays unseen is a truncated scan behind
a warning raised later in the file (stray bytes between the scans of a progressive JPEG). Without
simplejpeg installed, JPEGs are decoded by Pillow alone, as before this check: a truncated scan that
ends with its marker is then kept with a grey bottom.
"""

from __future__ import annotations

import importlib
from types import ModuleType

import numpy as np

# libjpeg's warnings for a scan that ran out of data: JWRN_HIT_MARKER and JWRN_JPEG_EOF.
TRUNCATION_WARNINGS = ("premature end of data segment", "premature end of jpeg file")

_simplejpeg: ModuleType | None = None
_looked = False


def _module() -> ModuleType | None:
    global _simplejpeg, _looked
    if not _looked:
        try:
            _simplejpeg = importlib.import_module("simplejpeg")
        except ImportError:
            _simplejpeg = None
        _looked = True
    return _simplejpeg


def available() -> bool:
    """Whether simplejpeg is installed, so truncated scans are refused."""
    return _module() is not None


def truncation(message: str) -> bool:
    """Whether a libjpeg warning says the scan data ended before the image did."""
    lowered = message.lower()
    return any(warning in lowered for warning in TRUNCATION_WARNINGS)


class Truncated(ValueError):
    """The JPEG's scan ended early; the message is libjpeg's warning."""


def decode(data: bytes, width: int, height: int) -> np.ndarray | None:
    """The YCbCr or grey JPEG in `data` as uint8 RGB [height, width, 3] (its sides at the DCT scale
    asked for), Truncated if its scan ends early, or None when Pillow is to decode it instead."""
    simplejpeg = _module()
    if simplejpeg is None:
        return None
    try:
        pixels = simplejpeg.decode_jpeg(data, colorspace="rgb", min_height=height, min_width=width, strict=True)
    except ValueError as error:
        _raise_truncation(data, str(error))
        return None
    if not isinstance(pixels, np.ndarray) or pixels.shape != (height, width, 3) or pixels.dtype != np.uint8:
        return None
    return pixels


def check(data: bytes) -> None:
    """Truncated if the JPEG's scan ends early, found by a strict decode at the smallest DCT scale;
    nothing for any other warning or error, or without simplejpeg."""
    simplejpeg = _module()
    if simplejpeg is None:
        return
    _strict_check(simplejpeg, data, retry=True)


def _strict_check(simplejpeg: ModuleType, data: bytes, *, retry: bool) -> None:
    try:
        simplejpeg.decode_jpeg(data, colorspace="gray", min_height=1, min_width=1, strict=True)
    except ValueError as error:
        _raise_truncation(data, str(error), retry=retry)


def _raise_truncation(data: bytes, message: str, *, retry: bool = True) -> None:
    """Truncated for a truncation warning; for stray bytes in the header, the check of a copy without them."""
    if truncation(message):
        raise Truncated(message)
    simplejpeg = _module()
    if retry and simplejpeg is not None and "extraneous bytes before marker" in message:
        cleaned = header_without_stray_bytes(data)
        if cleaned is not None:
            _strict_check(simplejpeg, cleaned, retry=False)


# Markers that stand alone, with no length after them: TEM and the restart markers.
_STANDALONE = (0x01, *range(0xD0, 0xD8))


def header_without_stray_bytes(data: bytes) -> bytes | None:
    """`data` with the bytes libjpeg skips between the header's segments taken out (up to the first scan),
    or None when there are none or the header does not parse. libjpeg finds the next marker as this does:
    the next 0xFF, past fill 0xFFs, followed by a byte that is not 0x00."""
    out, at, stray, size = bytearray(data[:2]), 2, False, len(data)
    while at < size:
        start = at
        while True:
            at = data.find(b"\xff", at)
            if at < 0:
                return None
            marker_at = at + 1
            while marker_at < size and data[marker_at] == 0xFF:
                marker_at += 1
            if marker_at >= size:
                return None
            if data[marker_at] != 0x00:
                break
            at = marker_at + 1
        stray = stray or at > start
        marker = data[marker_at]
        if marker == 0xDA:
            return bytes(out + data[marker_at - 1 :]) if stray else None
        if marker == 0xD9:
            return None
        if marker in _STANDALONE:
            out += data[marker_at - 1 : marker_at + 1]
            at = marker_at + 1
            continue
        if marker_at + 3 > size:
            return None
        end = marker_at + 1 + ((data[marker_at + 1] << 8) | data[marker_at + 2])
        out += data[marker_at - 1 : end]
        at = end
    return None

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

What stays unseen: a truncated scan after a harmless warning that libjpeg raises first (stray bytes
between header segments, for one), since the strict decode stops at the first warning. Without
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
        if truncation(str(error)):
            raise Truncated(str(error)) from None
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
    try:
        simplejpeg.decode_jpeg(data, colorspace="gray", min_height=1, min_width=1, strict=True)
    except ValueError as error:
        if truncation(str(error)):
            raise Truncated(str(error)) from None

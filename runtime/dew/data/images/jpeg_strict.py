"""JPEGs whose scan is cut short or damaged, refused: libjpeg's warnings read through simplejpeg's strict decode.

A JPEG whose entropy-coded data stops before its last MCU but still ends with an end-of-image marker
(a cut-off download with the marker re-appended, or a header that claims more rows than the scan holds)
decodes under Pillow and OpenCV without an error: libjpeg paints the missing MCUs grey and only warns
("Corrupt JPEG data: premature end of data segment"), and neither binding passes the warning on. So
does scan data libjpeg cannot decode as it stands: a code no Huffman table holds, restart markers out
of step (a restart interval lost), scans that refine coefficients no earlier scan gave; Pillow keeps
such an image with garbled or shifted blocks. simplejpeg (libjpeg-turbo's TurboJPEG API) raises the
warning instead when decoding with strict=True. A truncation warning is `truncated`, a corruption
warning (CORRUPTION_WARNINGS) `corrupt_scan`. Any other warning ("N extraneous bytes before marker
0xd9", which real web JPEGs often carry, a bad ICC segment, a JFIF version or Adobe transform libjpeg
does not know, the zeroed scan parameters of some baseline files, whose pixels are intact), one this
module does not know, a JPEG simplejpeg cannot read, or a result of another shape is left to Pillow,
as before.

The check is the decode itself, so it costs nothing more: simplejpeg gives the pixels Pillow gives, bit
for bit (both libjpeg-turbo with its default islow IDCT and fancy upsampling), at the DCT scale Pillow's
draft mode picks, straight into a 3-byte-a-pixel array. So is the colour conversion of a CMYK JPEG,
which is Pillow's own: such a file is checked by a strict decode at the smallest scale first (an
entropy decode of every MCU, about half a full decode's time).

The strict decode stops at the first warning, so a harmless one could hide damage behind it. Stray
bytes, the usual such warning, are taken out of a copy that is checked again (Pillow still decodes the
file as it came; dew.data.images.jpeg_stray finds them): between segments by the segments' lengths,
and after a progressive JPEG's scan by libjpeg's own count, the scan they follow found by decoding the
file cut after each scan. What stays unseen: damage behind any other warning, behind stray bytes after
a sequential JPEG's scan (its last scan's, before the end marker, hide nothing), or behind more than
_MAX_COPIES copies; and a corruption that leaves every code valid, which only desynchronizes the scan:
libjpeg then warns of stray bytes before the end marker, or of a premature end (`truncated`). Without
simplejpeg installed, JPEGs are decoded by Pillow alone, as before this check: a truncated or corrupt
scan that ends with its marker is then kept with a grey bottom or garbled blocks.
"""

from __future__ import annotations

import importlib
import re
from types import ModuleType

import numpy as np

from dew.data.images import jpeg_stray

# libjpeg's warnings for a scan that ran out of data: JWRN_HIT_MARKER and JWRN_JPEG_EOF.
TRUNCATION_WARNINGS = ("premature end of data segment", "premature end of jpeg file")
# libjpeg's warnings for scan data it decoded wrong, each with the pixels it then paints: a code no
# Huffman or arithmetic table holds (JWRN_HUFF_BAD_CODE, JWRN_ARITH_BAD_CODE; libjpeg-turbo reports the
# Huffman one from its progressive decoder), restart markers out of step (JWRN_MUST_RESYNC: a restart
# interval lost or misplaced), scans that refine coefficients no earlier scan gave (JWRN_BOGUS_PROGRESSION).
CORRUPTION_WARNINGS = (
    "bad huffman code",
    "bad arithmetic code",
    "instead of rst",
    "inconsistent progression sequence",
)
# JWRN_EXTRANEOUS_DATA: bytes libjpeg skipped on its way to the next marker, how many and which marker.
_STRAY = re.compile(r"(\d+) extraneous bytes before marker 0x([0-9a-f]{2})")
_EOI = b"\xff\xd9"
# Copies with stray bytes taken out that one check decodes again, at most: each is one more decode.
_MAX_COPIES = 8

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
    """Whether simplejpeg is installed, so truncated and corrupt scans are refused."""
    return _module() is not None


def truncation(message: str) -> bool:
    """Whether a libjpeg warning says the scan data ended before the image did."""
    lowered = message.lower()
    return any(warning in lowered for warning in TRUNCATION_WARNINGS)


def corruption(message: str) -> bool:
    """Whether a libjpeg warning says the scan data could not be decoded as it stands."""
    lowered = message.lower()
    return any(warning in lowered for warning in CORRUPTION_WARNINGS)


class Truncated(ValueError):
    """The JPEG's scan ended early; the message is libjpeg's warning."""


class Corrupt(ValueError):
    """The JPEG's scan data is damaged; the message is libjpeg's warning."""


def decode(data: bytes, width: int, height: int) -> np.ndarray | None:
    """The YCbCr or grey JPEG in `data` as uint8 RGB [height, width, 3] (its sides at the DCT scale
    asked for), Truncated or Corrupt for a damaged scan, or None when Pillow is to decode it instead."""
    simplejpeg = _module()
    if simplejpeg is None:
        return None
    try:
        pixels = simplejpeg.decode_jpeg(data, colorspace="rgb", min_height=height, min_width=width, strict=True)
    except ValueError as error:
        _judge(simplejpeg, data, str(error))
        return None
    if not isinstance(pixels, np.ndarray) or pixels.shape != (height, width, 3) or pixels.dtype != np.uint8:
        return None
    return pixels


def check(data: bytes) -> None:
    """Truncated or Corrupt for a damaged scan, found by a strict decode at the smallest DCT scale;
    nothing for any other warning or error, or without simplejpeg."""
    simplejpeg = _module()
    if simplejpeg is None:
        return
    message = _warning(simplejpeg, data)
    if message is not None:
        _judge(simplejpeg, data, message)


def _warning(simplejpeg: ModuleType, data: bytes) -> str | None:
    """The first warning or the error of a strict decode at the smallest DCT scale, None if it has none."""
    try:
        simplejpeg.decode_jpeg(data, colorspace="gray", min_height=1, min_width=1, strict=True)
    except ValueError as error:
        return str(error)
    return None


def _judge(simplejpeg: ModuleType, data: bytes, message: str) -> None:
    """Truncated or Corrupt for the first damage libjpeg warns of, looking past stray bytes: while the
    warning is theirs, a copy without them is decoded again. Any other warning or error says nothing."""
    for _ in range(_MAX_COPIES + 1):
        if truncation(message):
            raise Truncated(message)
        if corruption(message):
            raise Corrupt(message)
        stray = _STRAY.search(message.lower())
        if stray is None or stray.group(2) == "d9":
            return  # no more scan data is read after stray bytes before the end-of-image marker
        copy = jpeg_stray.without_stray_bytes(data) or _without_stray_scan_end(simplejpeg, data, int(stray.group(1)))
        if copy is None:
            return
        data = copy
        found = _warning(simplejpeg, data)
        if found is None:
            return
        message = found


def _without_stray_scan_end(simplejpeg: ModuleType, data: bytes, count: int) -> bytes | None:
    """`data` without the `count` stray bytes libjpeg warned of at the end of a progressive JPEG's scan,
    or None where they are not found so.

    Which scan they end is found by decoding the file cut after each scan's data, an end-of-image marker
    put there: a cut before them decodes clean, a cut after them warns. libjpeg's progressive decoder
    reads a scan's bytes only as far as its bit buffer asks, whatever follows, so a cut file reads alike
    up to the cut: the first cut that warns is theirs, and warns of the same count. Not for a sequential
    JPEG: libjpeg-turbo's sequential decoder reads further ahead where more of the file is left, which
    moves the count. The copy is kept only if it cut after that scan decodes clean.
    """
    scans = jpeg_stray.progressive_scans(data)
    if not scans:
        return None
    low, high = 0, len(scans) - 1  # the first scan whose cut warns is in scans[low : high + 1]
    while low < high:
        middle = (low + high) // 2
        if _warning(simplejpeg, data[: scans[middle][1]] + _EOI) is None:
            low = middle + 1
        else:
            high = middle
    start, end = scans[low]
    if _warning(simplejpeg, data[:end] + _EOI) != f"Corrupt JPEG data: {count} extraneous bytes before marker 0xd9":
        return None
    copy = jpeg_stray.without_stray_scan_end(data, start, end, count)
    if copy is None or _warning(simplejpeg, copy[: end - (len(data) - len(copy))] + _EOI) is not None:
        return None
    return copy

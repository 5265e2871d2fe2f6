"""The pixels of one image: decode to RGB, check, resize, crop and encode.

Every image path of dew goes through these few functions (the image-shard job, url ingest, the image
readers), so an image is dropped for the same reasons and resized the same way wherever it is read.

- decode: Pillow, because it refuses what other decoders hand back half-drawn (a JPEG cut off without
  its end marker decodes under OpenCV with a grey bottom and a warning). The header is read first, so an
  image whose pixel count is a decompression bomb, or whose sides already fail the rules, is dropped
  before any pixel is decoded. Given the size a caller will resize to, a JPEG is decoded at the smallest
  DCT scale that still covers it (Pillow's draft mode), which makes a large photograph several times
  cheaper to read. A JPEG whose scan ends early but still carries its end marker, which Pillow too fills
  in grey, is found by simplejpeg's strict decode (dew.data.images.jpeg_strict), and so is one whose scan
  data libjpeg decodes wrong (a bad Huffman code, restart markers out of step), which Pillow keeps as
  garbled blocks; the strict decode also gives the pixels of YCbCr and grey JPEGs, Pillow's bit for bit.
- decode_whole_jpeg: OpenCV, for bytes a caller knows were written whole (a committed shard verified
  against its checksum) and that end with the JPEG's end-of-image marker. It gives the pixels Pillow
  gives, at the same DCT scale (both are libjpeg-turbo: the same IDCT and upsampling), straight in RGB,
  about 10% sooner; anything it is not sure of is left to `decode`, and so is an image of more than
  16 megapixels decoded, since OpenCV's binding copies its result once more (6 bytes a pixel).
- memory: one decode holds at most about 4 bytes a pixel of the decoded image plus a constant, whatever
  the rules check (dew.data.images.pixel_buffer): Pillow decodes into a buffer dew converts in place,
  and the flat-colour rule compares uint8 strips, never a float copy of the image. A progressive JPEG
  adds libjpeg's coefficients of the whole image (2 bytes a sample) at any draft scale.
- orientation and colour: pixels are taken as stored, EXIF orientation not applied and an ICC profile
  not either (the values read as sRGB), on every path alike.
- to RGB: grey, palette, CMYK and 16-bit images are converted (16-bit scaled to 8, not clipped); alpha is
  composited onto white, since transparent pixels hold arbitrary colours a model must not learn.
- resize: OpenCV, INTER_AREA to shrink and INTER_LANCZOS4 to enlarge (img2dataset's choice); the shorter
  side is scaled to the size, and a crop (centred, or at a given offset for augmentation) makes it square.
- encode: OpenCV's JPEG/PNG/WebP encoders, deterministic for a given library build.
"""

from __future__ import annotations

import dataclasses
import functools
import io
import struct
import warnings
from typing import Any

import numpy as np

from dew.data.extras import require
from dew.data.images import jpeg_strict, pixel_buffer
from dew.data.sections import IMAGE_ENCODINGS

# Why an image is dropped; every image path counts its drops under these names.
UNDECODABLE = "undecodable"
TRUNCATED = "truncated"
CORRUPT_SCAN = "corrupt_scan"
NOT_RGB = "not_rgb"
TOO_SMALL = "too_small"
BAD_ASPECT = "bad_aspect"
FLAT_COLOUR = "flat_colour"
TOO_MANY_PIXELS = "too_many_pixels"
UNENCODABLE = "unencodable"  # decoded and kept by the rules, but longer than the encoding asked for holds
REASONS = (
    UNDECODABLE,
    TRUNCATED,
    CORRUPT_SCAN,
    NOT_RGB,
    TOO_SMALL,
    BAD_ASPECT,
    FLAT_COLOUR,
    TOO_MANY_PIXELS,
    UNENCODABLE,
)

ENCODINGS = IMAGE_ENCODINGS  # what the images section allows is what encode() writes
# The longest side each encoder writes: WebP's 14-bit sides, libjpeg's JPEG_MAX_DIMENSION (the format's
# 16 bits less a margin), libpng's default user limit. A longer image is UNENCODABLE, checked before
# OpenCV is called (which would only return False, and log an error).
MAX_SIDES = {"jpeg": 65_500, "webp": 16_383, "png": 1_000_000}
# Pillow's own decompression-bomb limit: 89.5 megapixels, about a 9459 × 9459 image.
MAX_PIXELS = 89_478_485
# What Pillow's plugins raise on damaged or unsupported bytes besides OSError: Image.open's own list of format
# errors, plus ValueError, EOFError and NotImplementedError (a DDS pixel format it does not know, say). One
# url's file must be dropped as undecodable, never end the stream or the job that fetched it. RuntimeError is
# what the AVIF plugin raises for damaged data ("Failed to decode frame 0: Decoding of color planes failed").
_DAMAGE = (SyntaxError, ValueError, EOFError, IndexError, TypeError, struct.error, NotImplementedError, RuntimeError)
# Start-of-scan markers past which a JPEG is refused before it is decoded: a progressive image has about
# ten; each scan is a pass over the image's coefficients, so a small file of many thousand empty scans
# would hold a worker for minutes (libjpeg-turbo suggests a limit of 500 to its fuzzers).
MAX_JPEG_SCANS = 1000
# Formats Pillow decodes by running another program on the file: never opened (see _formats).
_EXTERNAL = ("EPS",)


class ImageRejected(ValueError):
    """An image dropped for `reason` (one of REASONS); the message says what was found."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


@dataclasses.dataclass(frozen=True, kw_only=True)
class ImageRules:
    """What an image must be to be kept. The defaults are the filters FlaxDiff's corpora were built
    with: the shorter side at least 128 px, sides within 2.4 of each other, not one flat colour."""

    min_size: int = 128
    max_aspect: float = 2.4
    min_std: float = 1e-5
    max_pixels: int = MAX_PIXELS

    def __post_init__(self) -> None:
        if not isinstance(self.min_size, int) or self.min_size < 0:
            raise ValueError(f"ImageRules.min_size must be a non-negative int, got {self.min_size!r}")
        if not self.max_aspect >= 1:
            raise ValueError(f"ImageRules.max_aspect must be at least 1, got {self.max_aspect!r}")
        if not self.min_std >= 0:
            raise ValueError(f"ImageRules.min_std must be non-negative, got {self.min_std!r}")
        if not isinstance(self.max_pixels, int) or self.max_pixels < 1:
            raise ValueError(f"ImageRules.max_pixels must be a positive int, got {self.max_pixels!r}")

    def check_sides(self, width: int, height: int) -> None:
        """Drops an image by its header's sides, before anything is decoded."""
        if width * height > self.max_pixels:
            raise ImageRejected(TOO_MANY_PIXELS, f"{width} × {height} is over {self.max_pixels} pixels")
        if min(width, height) < self.min_size:
            raise ImageRejected(TOO_SMALL, f"{width} × {height} has a side under {self.min_size} px")
        if max(width, height) > self.max_aspect * min(width, height):
            raise ImageRejected(BAD_ASPECT, f"{width} × {height} is longer than {self.max_aspect}:1")

    def check_pixels(self, pixels: np.ndarray) -> None:
        """Drops an image of one flat colour: every channel's standard deviation under min_std, which at
        the default means one RGB triple for every pixel. A rule of 0 is skipped (no deviation is below 0)."""
        if self.min_std > 0 and pixel_buffer.is_flat(pixels, self.min_std):
            raise ImageRejected(FLAT_COLOUR, f"every pixel is {pixels[0, 0].tolist()} (within {self.min_std})")


# Everything is kept but what cannot be decoded: for readers of shards a job has already filtered.
NO_RULES = ImageRules(min_size=0, max_aspect=float("inf"), min_std=0.0)


def image_size(data: bytes) -> tuple[int, int]:
    """(width, height) from the header alone."""
    return _open(data).size


def decode(data: bytes, *, rules: ImageRules = NO_RULES, size: int | None = None, convert: bool = True) -> np.ndarray:
    """The image in `data` as uint8 RGB [height, width, 3], or ImageRejected with the reason.

    `size` is the shorter side the caller will scale to: a JPEG is then decoded no larger than needed
    to cover it (both sides stay at least `size`, so the result resizes exactly as the full image would
    up to the decoder's rounding). convert=False drops what is not stored as RGB (grey, palette, alpha,
    CMYK, 16-bit) as NOT_RGB instead of converting it.
    """
    webp = data[:4] == b"RIFF" and data[8:12] == b"WEBP" and data[12:15] == b"VP8"
    if webp:
        decoded, webp = _decode_webp(data, rules, convert)
        if decoded is not None:
            return decoded
    image = _open(data)
    if image.format in ("JPEG", "MPO"):
        # FF DA is always a marker: the scans' own FF bytes are stuffed (FF 00); an embedded thumbnail's
        # few scans count too, and an APP segment's bytes could add one a 64 KiB: far from the limit.
        scans = data.count(b"\xff\xda")
        if scans > MAX_JPEG_SCANS:
            raise ImageRejected(UNDECODABLE, f"{scans} scans, more than the {MAX_JPEG_SCANS} a JPEG is decoded with")
    if not convert and image.mode != "RGB":
        raise ImageRejected(NOT_RGB, f"the image is stored as {image.mode!r}, not RGB")
    rules.check_sides(*image.size)
    try:
        pixels = _strict_jpeg(data, image, size)
        if pixels is None:
            if size is not None and image.format == "JPEG":
                image.draft("RGB", (size, size))
            pixels = pixel_buffer.load_rgb(image, None if webp else data)
    except jpeg_strict.Truncated as error:
        raise ImageRejected(TRUNCATED, f"the scan ends early: {error}") from None
    except jpeg_strict.Corrupt as error:
        raise ImageRejected(CORRUPT_SCAN, f"the scan data is damaged: {error}") from None
    except ImageRejected:
        raise
    except OSError as error:
        reason = TRUNCATED if "truncated" in str(error) or "broken" in str(error) else UNDECODABLE
        raise ImageRejected(reason, str(error)) from None
    except _DAMAGE as error:
        raise ImageRejected(UNDECODABLE, f"{type(error).__name__}: {error}") from None
    rules.check_pixels(pixels)
    return pixels


def _decode_webp(data: bytes, rules: ImageRules, convert: bool) -> tuple[np.ndarray | None, bool]:
    """A WebP (as Pillow accepts the file: its prefix) opened and decoded by libwebp where the bytes lie,
    with Pillow's size and mode and the same checks, and whether libwebp had its try at the pixels.
    None where libwebp refuses it or is not reachable: Pillow then opens and decodes it, naming what is wrong."""
    from dew.data.images import webp_buffer

    opened = webp_buffer.opened(data)
    if opened is None:
        return None, False
    width, height, alpha = opened
    limit = require("PIL.Image", for_what="decoding images").MAX_IMAGE_PIXELS
    if limit is not None and width * height > 2 * limit:  # where Pillow's open refuses a decompression bomb
        raise ImageRejected(TOO_MANY_PIXELS, f"{width * height} pixels exceed Pillow's limit of {2 * limit}")
    if not convert and alpha:
        raise ImageRejected(NOT_RGB, "the image is stored as 'RGBA', not RGB")
    rules.check_sides(width, height)
    pixels = pixel_buffer.webp_rgb(data, width, height, alpha=alpha)
    if pixels is not None:
        rules.check_pixels(pixels)
    return pixels, True


def _strict_jpeg(data: bytes, image: Any, size: int | None) -> np.ndarray | None:
    """A YCbCr or grey JPEG decoded by simplejpeg at the scale Pillow's draft would pick, or None for
    Pillow to decode; jpeg_strict.Truncated or Corrupt for a damaged scan, whichever decodes it."""
    if image.format not in ("JPEG", "MPO"):
        return None
    if image.format == "JPEG" and image.mode in ("RGB", "L"):
        width, height = image.size
        scale = 1 if size is None else draft_scale(width, height, size)
        return jpeg_strict.decode(data, -(-width // scale), -(-height // scale))
    jpeg_strict.check(data)  # CMYK, or the first picture of a multi-picture file: Pillow decodes it
    return None


# Start-of-frame markers of the JPEGs both decoders read alike: baseline, extended and progressive Huffman.
_SOF = (0xC0, 0xC1, 0xC2)
# Markers that stand alone, with no length after them: TEM and the restart markers.
_STANDALONE = (0x01, *range(0xD0, 0xD8))
# How far back from the end the end-of-image marker is looked for, past zero padding.
_TAIL = 1024
# Decoded pixels above which decode_whole_jpeg leaves a JPEG to `decode`: OpenCV's 6 bytes a pixel stay
# within the 4 bytes a pixel + 64 MB a decode may hold up to here (2 × 16M + 16 MB of libjpeg's own).
_WHOLE_JPEG_PIXELS = 16 << 20


def _whole_jpeg_sides(data: bytes) -> tuple[int, int] | None:
    """(width, height) of an 8-bit, one- or three-component JPEG that ends with its end-of-image marker
    (zero padding after it allowed), from the header; None for anything else.

    A cut-off scan does not end with the marker unless it was put back after the cut (a 0xFF in
    entropy-coded data is always followed by 0x00 or a restart marker), which is why this path is only
    for bytes known to be whole; a cut inside the header leaves a segment running past the end: None.
    Multi-picture files (an APP2 "MPF" segment) are None: Pillow reads them as MPO, without draft mode.
    """
    if data[:2] != b"\xff\xd8" or not data[-_TAIL:].rstrip(b"\x00").endswith(b"\xff\xd9"):
        return None
    at, size = 2, len(data)
    while at + 4 <= size:
        if data[at] != 0xFF:
            return None
        marker = data[at + 1]
        if marker == 0xFF:  # fill byte before a marker
            at += 1
            continue
        if marker in _STANDALONE:
            at += 2
            continue
        length = (data[at + 2] << 8) | data[at + 3]
        if marker in _SOF:
            if at + 10 > size or data[at + 4] != 8 or data[at + 9] not in (1, 3):
                return None
            height, width = (data[at + 5] << 8) | data[at + 6], (data[at + 7] << 8) | data[at + 8]
            return (width, height) if width and height else None
        if (0xC3 <= marker <= 0xCF and marker not in (0xC4, 0xC8, 0xCC)) or marker in (0xD9, 0xDA):
            return None  # another kind of frame, or a scan or the end before any frame
        if marker == 0xE2 and data[at + 4 : at + 8] == b"MPF\x00":
            return None
        at += 2 + length
    return None


def draft_scale(width: int, height: int, size: int) -> int:
    """The DCT scale (1, 2, 4 or 8) a JPEG is decoded at for scaling to `size`: the largest that keeps
    both sides at least `size`, as Pillow's draft mode chooses it. Sides become ceil(side / scale)."""
    ratio = min(width // size, height // size)
    return next(scale for scale in (8, 4, 2, 1) if ratio >= scale or scale == 1)


def decode_whole_jpeg(data: bytes, *, size: int, rules: ImageRules = NO_RULES) -> np.ndarray | None:
    """The JPEG in `data` as uint8 RGB, decoded by OpenCV at the DCT scale `decode` uses for `size`, or
    None when `data` is not a JPEG this path is sure of: the caller then decodes it with `decode`.

    Only for bytes known to hold what their writer wrote whole, such as a committed shard verified
    against its checksum: OpenCV fills in what a damaged scan lacks instead of refusing it. The pixels
    are those `decode` gives (EXIF orientation is ignored by both), and the rules apply alike.
    """
    sides = _whole_jpeg_sides(data)
    if sides is None:
        return None
    rules.check_sides(*sides)
    cv2 = require("cv2", for_what="decoding images")
    scale = draft_scale(*sides, size)
    if -(-sides[0] // scale) * -(-sides[1] // scale) > _WHOLE_JPEG_PIXELS:
        return None
    reduced = {1: 0, 2: cv2.IMREAD_REDUCED_COLOR_2, 4: cv2.IMREAD_REDUCED_COLOR_4, 8: cv2.IMREAD_REDUCED_COLOR_8}
    # The REDUCED flags carry IMREAD_COLOR (BGR); RGB is asked for instead, which costs no conversion.
    flags = (reduced[scale] & ~cv2.IMREAD_COLOR) | cv2.IMREAD_COLOR_RGB | cv2.IMREAD_IGNORE_ORIENTATION
    pixels = cv2.imdecode(np.frombuffer(data, np.uint8), flags)
    width, height = (-(-side // scale) for side in sides)
    if pixels is None or pixels.shape != (height, width, 3):
        return None  # not what the header promised: `decode` says why
    rules.check_pixels(pixels)
    return pixels


def _open(data: bytes) -> Any:
    pil = require("PIL.Image", for_what="decoding images")
    if not data:
        raise ImageRejected(UNDECODABLE, "no bytes")
    try:
        with warnings.catch_warnings():
            # The rules judge the pixel count from the header themselves; Pillow's warning would only repeat it.
            warnings.simplefilter("ignore", pil.DecompressionBombWarning)
            return pil.open(io.BytesIO(data), formats=_formats(pil))
    except pil.DecompressionBombError as error:
        raise ImageRejected(TOO_MANY_PIXELS, str(error)) from None
    except (OSError, *_DAMAGE) as error:
        raise ImageRejected(UNDECODABLE, f"{type(error).__name__}: {error}") from None


@functools.cache
def _formats(pil: Any) -> tuple[str, ...]:
    """Every format Pillow reads, in its own order, but EPS: Pillow renders EPS by running Ghostscript on
    the file's PostScript, a program from a url or a row run wherever `gs` is installed (and an image
    there only, undecodable elsewhere). The common formats first (preinit), as Pillow's own open tries them."""
    pil.preinit()
    pil.init()
    return tuple(name for name in pil.ID if name not in _EXTERNAL)


def scale_shorter_side(pixels: np.ndarray, size: int) -> np.ndarray:
    """`pixels` scaled so its shorter side is `size`, keeping the aspect (longer side rounded, at least size)."""
    cv2 = require("cv2", for_what="resizing images")
    height, width = pixels.shape[:2]
    scale = size / min(height, width)
    if scale == 1:
        return pixels
    target = (max(size, round(width * scale)), max(size, round(height * scale)))
    interpolation = cv2.INTER_AREA if scale < 1 else cv2.INTER_LANCZOS4
    return cv2.resize(pixels, target, interpolation=interpolation)


def crop(pixels: np.ndarray, size: int, *, top: int | None = None, left: int | None = None) -> np.ndarray:
    """The size × size square at (top, left), centred where an offset is None."""
    height, width = pixels.shape[:2]
    if height < size or width < size:
        raise ValueError(f"a {width} × {height} image has no {size} × {size} square")
    top = (height - size) // 2 if top is None else top
    left = (width - size) // 2 if left is None else left
    if not (0 <= top <= height - size and 0 <= left <= width - size):
        raise ValueError(f"a {size} × {size} square at ({top}, {left}) leaves the {width} × {height} image")
    return pixels[top : top + size, left : left + size]


def square(pixels: np.ndarray, size: int) -> np.ndarray:
    """The CLIP-style square: the shorter side scaled to `size`, the centre cropped."""
    return np.ascontiguousarray(crop(scale_shorter_side(pixels, size), size))


def encode(pixels: np.ndarray, encoding: str, quality: int = 95) -> bytes:
    """uint8 RGB pixels as a JPEG, PNG or WebP file's bytes; ImageRejected (UNENCODABLE) for an image the
    encoding cannot hold (a side over MAX_SIDES), which drops that one image, never the job writing it."""
    cv2 = require("cv2", for_what="encoding images")
    if encoding not in ENCODINGS:
        raise ValueError(f"image encoding {encoding!r} is not one of {ENCODINGS}")
    if not 1 <= quality <= 100:
        raise ValueError(f"image quality must be in 1..100, got {quality}")
    height, width = pixels.shape[:2]
    if max(height, width) > MAX_SIDES[encoding]:
        most = MAX_SIDES[encoding]
        raise ImageRejected(UNENCODABLE, f"a {width} × {height} image: {encoding} holds at most {most} px a side")
    params = {
        "jpeg": [cv2.IMWRITE_JPEG_QUALITY, quality],
        "webp": [cv2.IMWRITE_WEBP_QUALITY, quality],
        "png": [cv2.IMWRITE_PNG_COMPRESSION, 3],
    }[encoding]
    # RGB to the BGR OpenCV encodes, as one pass into a new contiguous array.
    ok, data = cv2.imencode(f".{encoding}", cv2.cvtColor(np.ascontiguousarray(pixels), cv2.COLOR_RGB2BGR), params)
    if not ok:
        raise ImageRejected(UNENCODABLE, f"OpenCV could not encode a {width} × {height} image as {encoding}")
    return data.tobytes()

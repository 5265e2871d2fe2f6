"""Real photographs (skimage.data) encoded here, and the damaged or unusable images a corpus meets."""

from __future__ import annotations

import io

import numpy as np


def encoded(pixels: np.ndarray, fmt: str, mode: str | None = None) -> bytes:
    """`pixels` as a `fmt` (JPEG, PNG, WEBP) file's bytes through Pillow, converted to `mode` first if given."""
    from PIL import Image

    image = Image.fromarray(pixels)
    if mode is not None:
        image = image.convert(mode)
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **({"quality": 90} if fmt in ("JPEG", "WEBP") else {}))
    return buffer.getvalue()


def photo(name: str) -> np.ndarray:
    from skimage import data

    return getattr(data, name)()


def good_images() -> dict[str, bytes]:
    """Photographs of several sizes, colour, grey and RGBA, in every encoding, and CMYK and 16-bit files."""
    grey16 = photo("camera").astype(np.uint16) * 257
    return {
        "astronaut.jpg": encoded(photo("astronaut"), "JPEG"),
        "coffee.png": encoded(photo("coffee"), "PNG"),
        "rocket.webp": encoded(photo("rocket"), "WEBP"),
        "coins.png": encoded(photo("coins"), "PNG"),
        "logo.png": encoded(photo("logo"), "PNG"),
        "chelsea.jpg": encoded(photo("chelsea"), "JPEG", mode="CMYK"),
        "camera16.png": encoded(grey16, "PNG"),
    }


def bad_images() -> dict[str, tuple[bytes, str]]:
    """Images every job must drop, with the reason dew.data.images.pixels gives."""
    jpeg = encoded(photo("astronaut"), "JPEG")
    return {
        "corrupt.jpg": (b"\xff\xd8\xff\xe0 this is no JPEG at all" * 4, "undecodable"),
        "truncated.jpg": (jpeg[: len(jpeg) // 2], "truncated"),
        "restarts.jpg": (corrupt_scan_jpegs()["lost-restart-interval.jpg"], "corrupt_scan"),
        "empty.png": (b"", "undecodable"),
        "tiny.png": (encoded(photo("astronaut")[:60, :60], "PNG"), "too_small"),
        "banner.jpg": (encoded(photo("astronaut")[:150, :], "JPEG"), "bad_aspect"),
        "flat.png": (encoded(np.full((200, 200, 3), 127, np.uint8), "PNG"), "flat_colour"),
        "hubble.jpg": (encoded(photo("hubble_deep_field"), "JPEG"), "too_many_pixels"),
        "depth.tif": (encoded(photo("camera").astype(np.float32) / 255, "TIFF"), "not_rgb"),
    }


# Passed to the job with bad_images(): hubble_deep_field (1000 × 872) is over it, every good image under.
MAX_PIXELS = 600_000


def _taller(jpeg: bytes, rows: int) -> bytes:
    """`jpeg` with its baseline frame header claiming `rows` more rows than its scan holds."""
    frame = bytearray(jpeg)
    at = frame.index(b"\xff\xc0")
    height = (frame[at + 5] << 8) | frame[at + 6]
    frame[at + 5 : at + 7] = (height + rows).to_bytes(2, "big")
    return bytes(frame)


def cut_scan_jpegs() -> dict[str, bytes]:
    """JPEGs whose scan ends early yet which end with their end-of-image marker: Pillow and OpenCV paint
    the missing MCUs grey and only warn. Each must be dropped as truncated."""

    progressive_bytes = progressive_jpeg(photo("astronaut"))
    cut = {
        "baseline": encoded(photo("astronaut"), "JPEG"),
        "grey": encoded(photo("camera"), "JPEG"),
        "cmyk": encoded(photo("coffee"), "JPEG", mode="CMYK"),
        "progressive": progressive_bytes,
    }
    found = {f"cut-{name}.jpg": data[: len(data) * 2 // 3] + b"\xff\xd9" for name, data in cut.items()}
    found["taller.jpg"] = _taller(encoded(photo("astronaut"), "JPEG"), 64)
    # libjpeg stops at its first warning: stray bytes in the header must not hide the cut behind them.
    stray = stray_byte_jpegs()["stray-in-header.jpg"]
    found["cut-behind-stray-bytes.jpg"] = stray[: len(stray) * 2 // 3] + b"\xff\xd9"
    # ... nor stray bytes after a progressive JPEG's scan, which hide the scans after them the same way.
    between = stray_byte_jpegs()["stray-between-scans.jpg"]
    found["cut-behind-stray-scan-bytes.jpg"] = between[: len(between) * 2 // 3] + b"\xff\xd9"
    return found


def progressive_jpeg(pixels: np.ndarray) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(pixels).save(buffer, format="JPEG", quality=90, progressive=True)
    return buffer.getvalue()


def _scan_data(jpeg: bytes, scan: int) -> tuple[int, int]:
    """(start, end) of the entropy-coded data of the `scan`th scan: after its header, to the next marker
    that is not a restart marker (a 0xFF in the data is always followed by 0x00 or a restart marker)."""
    at = -1
    for _ in range(scan + 1):
        at = jpeg.index(b"\xff\xda", at + 1)
    start = at + 2 + int.from_bytes(jpeg[at + 2 : at + 4], "big")
    end = start
    while jpeg[end + 1] == 0x00 or 0xD0 <= jpeg[end + 1] <= 0xD7 or jpeg[end] != 0xFF:
        end = jpeg.index(b"\xff", end + 1)
    return start, end


def stray_byte_jpegs() -> dict[str, bytes]:
    """Whole JPEGs with the stray bytes libjpeg warns of ("N extraneous bytes before marker"), as web
    JPEGs often carry: every one must be kept with Pillow's pixels."""
    jpeg = encoded(photo("chelsea"), "JPEG")
    tables = jpeg.index(b"\xff\xdb")
    progressive = progressive_jpeg(photo("astronaut"))
    _, scan_end = _scan_data(progressive, 2)  # the third of its ten scans, well before the middle of the file
    return {
        "stray-before-end.jpg": jpeg[:-2] + bytes(range(1, 101)) + b"\xff\xd9",
        "stray-in-header.jpg": jpeg[:tables] + b"\x00" * 7 + jpeg[tables:],
        "stray-between-scans.jpg": progressive[:scan_end] + bytes(range(1, 41)) + progressive[scan_end:],
    }


def corrupt_scan_jpegs() -> dict[str, bytes]:
    """Whole JPEGs whose scan data libjpeg decodes wrong, with a warning only: Pillow keeps each, garbled
    blocks and all. Each must be dropped as corrupt_scan."""
    from PIL import Image

    progressive = progressive_jpeg(photo("chelsea"))
    start, _ = _scan_data(progressive, 0)
    ones = start + 500  # three stuffed 0xFF bytes: 24 one bits, longer than any Huffman code
    first_scan = progressive.index(b"\xff\xda")
    _, first_end = _scan_data(progressive, 0)
    buffer = io.BytesIO()
    Image.fromarray(photo("chelsea")).save(buffer, format="JPEG", quality=90, restart_marker_blocks=4)
    restarts = buffer.getvalue()
    second, third = restarts.index(b"\xff\xd1"), restarts.index(b"\xff\xd2")
    return {
        "bad-huffman-code.jpg": progressive[:ones] + b"\xff\x00" * 3 + progressive[ones + 6 :],
        # a restart interval lost in transit, its marker with it: the next interval's blocks land in its place
        "lost-restart-interval.jpg": restarts[: second + 2] + restarts[third + 2 :],
        # the first scan (every component's DC coefficients) gone: the later scans refine what no scan gave
        "ac-before-dc.jpg": progressive[:first_scan] + progressive[first_end:],
    }

"""JPEGs whose scan ends early are refused as truncated, those whose scan data libjpeg decodes wrong as
corrupt_scan; stray bytes libjpeg only warns of are kept, and what they hide behind them is found."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from dew.data.images import jpeg_stray, jpeg_strict, pixels
from dew.data.images.pixels import ImageRejected
from tests.preprocess.photos import (
    corrupt_scan_jpegs,
    cut_scan_jpegs,
    encoded,
    photo,
    progressive_jpeg,
    stray_byte_jpegs,
)

pytest.importorskip("simplejpeg")


def pillow_rgb(data: bytes, size: int | None = None) -> np.ndarray:
    """What Pillow alone gives: its own decode (draft mode for a size) and conversion to RGB."""
    image = Image.open(io.BytesIO(data))
    if size is not None:
        image.draft("RGB", (size, size))
    return np.asarray(image.convert("RGB"))


@pytest.mark.parametrize("name", sorted(cut_scan_jpegs()))
@pytest.mark.parametrize("size", [None, 64])
def test_a_scan_that_ends_early_is_truncated_though_pillow_reads_it(name: str, size: int | None) -> None:
    data = cut_scan_jpegs()[name]
    assert pillow_rgb(data, size).size  # Pillow paints the missing MCUs grey, with no error
    with pytest.raises(ImageRejected) as rejected:
        pixels.decode(data, size=size)
    assert rejected.value.reason == pixels.TRUNCATED
    assert "premature end of data segment" in str(rejected.value)


def first_warning(data: bytes) -> str | None:
    import simplejpeg

    try:
        simplejpeg.decode_jpeg(data, colorspace="gray", min_height=1, min_width=1, strict=True)
    except ValueError as error:
        return str(error)
    return None


@pytest.mark.parametrize("name", ["cut-behind-stray-bytes.jpg", "cut-behind-stray-scan-bytes.jpg"])
def test_a_truncation_behind_stray_bytes_is_found(name: str) -> None:
    """libjpeg stops at its first warning: the stray bytes' (in the header, or after a progressive JPEG's
    third scan) comes before the cut, which a copy without them shows."""
    data = cut_scan_jpegs()[name]
    assert "extraneous bytes before marker" in (first_warning(data) or "")
    for size in (None, 64):
        with pytest.raises(ImageRejected) as rejected:
            pixels.decode(data, size=size)
        assert rejected.value.reason == pixels.TRUNCATED


@pytest.mark.parametrize("name", sorted(corrupt_scan_jpegs()))
@pytest.mark.parametrize("size", [None, 64])
def test_scan_data_libjpeg_decodes_wrong_is_corrupt_scan_though_pillow_reads_it(name: str, size: int | None) -> None:
    data = corrupt_scan_jpegs()[name]
    assert pillow_rgb(data, size).size  # Pillow keeps the garbled blocks, with no error
    with pytest.raises(ImageRejected) as rejected:
        pixels.decode(data, size=size)
    assert rejected.value.reason == pixels.CORRUPT_SCAN
    assert jpeg_strict.corruption(str(rejected.value))


def test_warnings_are_told_apart_by_libjpegs_text() -> None:
    for damaged in (
        "Corrupt JPEG data: bad Huffman code",
        "Corrupt JPEG data: bad arithmetic code",  # arithmetic-coded JPEGs: no encoder here makes one
        "Corrupt JPEG data: found marker 0xd9 instead of RST5",
        "Inconsistent progression sequence for component 2 coefficient 7",
    ):
        assert jpeg_strict.corruption(damaged) and not jpeg_strict.truncation(damaged)
    for harmless in (
        "Corrupt JPEG data: 12 extraneous bytes before marker 0xd9",
        "Invalid SOS parameters for sequential JPEG",
        "Corrupt JPEG data: bad ICC marker",
        "Warning: unknown JFIF revision number 3.01",
        "Unknown Adobe color transform code 7",
        "Application transferred too many scanlines",
    ):
        assert not jpeg_strict.corruption(harmless) and not jpeg_strict.truncation(harmless)


def test_sequential_scan_parameters_libjpeg_only_warns_of_keep_the_image() -> None:
    """Baseline files with zeros for a scan's spectral selection exist (libjpeg's own comment says so); the
    sequential decoder ignores those bytes, so the pixels are the intact file's, and the image is kept."""
    jpeg = encoded(photo("chelsea"), "JPEG")
    scan = jpeg.index(b"\xff\xda")
    header_end = scan + 2 + int.from_bytes(jpeg[scan + 2 : scan + 4], "big")
    zeroed = jpeg[: header_end - 2] + b"\x00" + jpeg[header_end - 1 :]  # Se 63 -> 0
    assert first_warning(zeroed) == "Invalid SOS parameters for sequential JPEG"
    np.testing.assert_array_equal(pixels.decode(zeroed), pillow_rgb(jpeg))


def test_stray_bytes_after_a_scan_are_taken_out_as_libjpeg_counts_them() -> None:
    jpeg = progressive_jpeg(photo("astronaut"))
    scans = jpeg_stray.progressive_scans(jpeg)
    assert scans is not None and len(scans) == 10
    assert jpeg_stray.progressive_scans(encoded(photo("astronaut"), "JPEG")) is None  # baseline: not for it
    start, end = scans[2]
    stray = b"\x12\xff\x00\x34\xff\xff\x00"  # 0xFF 0x00 counts as two, and so does a fill run with its 0x00
    data = jpeg[:end] + stray + jpeg[end:]
    assert jpeg_stray.without_stray_scan_end(data, start, end + len(stray), 6) == jpeg
    assert jpeg_stray.without_stray_scan_end(data, start, end + len(stray), 2) == jpeg[:end] + stray[:4] + jpeg[end:]
    assert jpeg_stray.without_stray_scan_end(data, start, end + len(stray), 1) is None  # counts no half of a pair
    restart = jpeg[:end] + b"\xff\xd3\x12" + jpeg[end:]
    assert jpeg_stray.without_stray_scan_end(restart, start, end + 3, 2) is None  # a marker is not skipped
    # between the tables before a scan and its header, segment lengths say where stray bytes are
    header = jpeg.rindex(b"\xff\xda", 0, scans[4][0])
    assert jpeg.rindex(b"\xff\xc4", 0, header) == scans[3][1]  # a scan's tables, then its header
    assert jpeg_stray.without_stray_bytes(jpeg[:header] + b"\x01\x02" + jpeg[header:]) == jpeg
    assert jpeg_stray.without_stray_bytes(data) is None  # after a scan's data they are no segment's


@pytest.mark.parametrize("name", sorted(stray_byte_jpegs()))
@pytest.mark.parametrize("size", [None, 64])
def test_stray_bytes_libjpeg_only_warns_of_are_kept_with_pillows_pixels(name: str, size: int | None) -> None:
    data = stray_byte_jpegs()[name]
    np.testing.assert_array_equal(pixels.decode(data, size=size), pillow_rgb(data, size))


def test_stray_bytes_between_header_segments_are_taken_out_as_libjpeg_skips_them() -> None:
    jpeg = encoded(photo("chelsea"), "JPEG")
    assert jpeg_stray.without_stray_bytes(jpeg) is None  # nothing stray
    assert jpeg_stray.without_stray_bytes(stray_byte_jpegs()["stray-in-header.jpg"]) == jpeg
    tables = jpeg.index(b"\xff\xdb")
    fill = jpeg[:tables] + b"\xff\xff" + jpeg[tables:]  # fill bytes before a marker are no stray bytes
    assert jpeg_stray.without_stray_bytes(fill) is None
    assert jpeg_stray.without_stray_bytes(jpeg[:tables] + b"\x00\x00") is None  # nothing before a marker


@pytest.mark.parametrize("progressive", [False, True])
@pytest.mark.parametrize("size", [None, 256, 100, 64, 20])
@pytest.mark.parametrize("name", ["astronaut", "chelsea", "camera"])
def test_simplejpeg_gives_exactly_pillows_pixels_at_every_draft_scale(name: str, progressive: bool, size) -> None:
    buffer = io.BytesIO()
    Image.fromarray(photo(name)).save(buffer, format="JPEG", quality=90, progressive=progressive)
    data = buffer.getvalue()
    width, height = Image.open(io.BytesIO(data)).size
    scale = 1 if size is None else pixels.draft_scale(width, height, size)
    strict = jpeg_strict.decode(data, -(-width // scale), -(-height // scale))
    assert strict is not None  # the path taken, not a fall back to Pillow
    np.testing.assert_array_equal(strict, pillow_rgb(data, size))
    np.testing.assert_array_equal(pixels.decode(data, size=size), strict)


def test_without_simplejpeg_jpegs_decode_through_pillow_as_before(monkeypatch: pytest.MonkeyPatch) -> None:
    monkeypatch.setattr(jpeg_strict, "_looked", True)
    monkeypatch.setattr(jpeg_strict, "_simplejpeg", None)
    assert not jpeg_strict.available()
    cut = cut_scan_jpegs()["cut-baseline.jpg"]
    np.testing.assert_array_equal(pixels.decode(cut), pillow_rgb(cut))  # the grey bottom is kept, as before
    whole = encoded(photo("astronaut"), "JPEG")
    np.testing.assert_array_equal(pixels.decode(whole, size=64), pillow_rgb(whole, 64))

"""JPEGs whose scan ends early are refused as truncated; stray bytes libjpeg only warns of are kept."""

from __future__ import annotations

import io

import numpy as np
import pytest
from PIL import Image

from dew.data.images import jpeg_strict, pixels
from dew.data.images.pixels import ImageRejected
from tests.preprocess.photos import cut_scan_jpegs, encoded, photo, stray_byte_jpegs

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


@pytest.mark.parametrize("name", sorted(stray_byte_jpegs()))
@pytest.mark.parametrize("size", [None, 64])
def test_stray_bytes_libjpeg_only_warns_of_are_kept_with_pillows_pixels(name: str, size: int | None) -> None:
    data = stray_byte_jpegs()[name]
    np.testing.assert_array_equal(pixels.decode(data, size=size), pillow_rgb(data, size))


def test_stray_bytes_between_header_segments_are_taken_out_as_libjpeg_skips_them() -> None:
    jpeg = encoded(photo("chelsea"), "JPEG")
    assert jpeg_strict.header_without_stray_bytes(jpeg) is None  # nothing stray
    assert jpeg_strict.header_without_stray_bytes(stray_byte_jpegs()["stray-in-header.jpg"]) == jpeg
    tables = jpeg.index(b"\xff\xdb")
    fill = jpeg[:tables] + b"\xff\xff" + jpeg[tables:]  # fill bytes before a marker are no stray bytes
    assert jpeg_strict.header_without_stray_bytes(fill) is None
    assert jpeg_strict.header_without_stray_bytes(jpeg[:tables] + b"\x00\x00") is None  # no scan: no copy


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

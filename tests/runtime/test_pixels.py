"""The pixel rules every image path shares, on real photographs and on every kind of bad image."""

from __future__ import annotations

import io

import numpy as np
import pytest

from dew.data.images import pixels
from dew.data.images.pixels import ImageRejected, ImageRules

pytest.importorskip("cv2")
Image = pytest.importorskip("PIL.Image")
data = pytest.importorskip("skimage.data")


def encoded(array: np.ndarray, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def reason(raw: bytes, rules: ImageRules = pixels.NO_RULES) -> str:
    with pytest.raises(ImageRejected) as error:
        pixels.decode(raw, rules=rules)
    return error.value.reason


@pytest.mark.parametrize("fmt", ["PNG", "WEBP"])
def test_lossless_files_decode_to_their_exact_pixels(fmt) -> None:
    photo = data.astronaut()
    options = {"lossless": True} if fmt == "WEBP" else {}
    np.testing.assert_array_equal(pixels.decode(encoded(photo, fmt, **options)), photo)


def test_a_jpeg_decodes_close_to_its_pixels_and_draft_decoding_still_covers_the_size() -> None:
    photo = data.chelsea()  # 300 × 451
    raw = encoded(photo, "JPEG", quality=95)
    full = pixels.decode(raw)
    assert full.shape == photo.shape and np.abs(full.astype(int) - photo).mean() < 3
    small = pixels.decode(raw, size=100)
    assert min(small.shape[:2]) >= 100 and small.shape[0] < photo.shape[0]
    a, b = pixels.square(full, 100).astype(int), pixels.square(small, 100).astype(int)
    assert np.abs(a - b).mean() < 4  # the same picture, read more cheaply


def test_every_mode_becomes_rgb() -> None:
    grey = data.camera()
    assert (pixels.decode(encoded(grey, "PNG"))[..., 1] == grey).all()
    rgba = np.dstack([data.astronaut(), np.full(grey.shape, 255, np.uint8)])
    rgba[:10, :10, 3] = 0  # transparent corner: composited onto white
    out = pixels.decode(encoded(rgba, "PNG"))
    assert (out[:10, :10] == 255).all() and (out[20:, 20:] == data.astronaut()[20:, 20:]).all()
    cmyk = io.BytesIO()
    Image.fromarray(data.coffee()).convert("CMYK").save(cmyk, format="JPEG", quality=95)
    assert np.abs(pixels.decode(cmyk.getvalue()).astype(int) - data.coffee()).mean() < 8
    deep = grey.astype(np.uint16) * 257
    sixteen = io.BytesIO()
    Image.fromarray(deep).save(sixteen, format="PNG")
    np.testing.assert_array_equal(pixels.decode(sixteen.getvalue())[..., 0], grey)


def test_broken_files_are_dropped_by_reason() -> None:
    jpeg = encoded(data.astronaut(), "JPEG")
    assert reason(b"") == pixels.UNDECODABLE
    assert reason(b"<html><body>not found</body></html>") == pixels.UNDECODABLE
    assert reason(jpeg[: len(jpeg) // 2]) == pixels.TRUNCATED
    png = encoded(data.astronaut(), "PNG")
    assert reason(png[: len(png) // 2]) in (pixels.TRUNCATED, pixels.UNDECODABLE)


def test_the_rules_drop_by_header_before_decoding_and_by_pixels_after() -> None:
    rules = ImageRules()
    assert reason(encoded(data.astronaut()[:100], "PNG"), rules) == pixels.TOO_SMALL
    assert reason(encoded(np.zeros((130, 400, 3), np.uint8) + 9, "PNG"), rules) == pixels.BAD_ASPECT
    assert reason(encoded(np.full((200, 200, 3), 77, np.uint8), "PNG"), rules) == pixels.FLAT_COLOUR
    assert reason(encoded(data.astronaut(), "PNG"), ImageRules(max_pixels=512 * 511)) == pixels.TOO_MANY_PIXELS


def test_the_flat_colour_rule_answers_as_each_channels_standard_deviation_does() -> None:
    # Strips stop at the first that settles it; near-flat images, where only the exact statistic can
    # decide, must still get numpy's per-channel std answer.
    rng = np.random.default_rng(0)
    images = [np.full((50, 60, 3), 7, np.uint8), data.astronaut(), np.full((3000, 200, 3), (0, 128, 128), np.uint8)]
    for _ in range(100):
        shape = (int(rng.integers(1, 200)), int(rng.integers(1, 200)), 3)
        image = np.full(shape, rng.integers(0, 256, 3), np.uint8)
        for _ in range(int(rng.integers(0, 3))):
            image[rng.integers(0, shape[0]), rng.integers(0, shape[1]), rng.integers(0, 3)] = rng.integers(0, 256)
        images.append(image)
    for min_std in (1e-5, 0.01, 0.5, 2.0, 60.0):
        rules = ImageRules(min_std=min_std)
        for image in images:
            try:
                rules.check_pixels(image)
                dropped = False
            except ImageRejected as rejected:
                dropped = rejected.reason == pixels.FLAT_COLOUR
            want = float(image.reshape(-1, 3).std(axis=0).max()) < min_std
            assert dropped == want, (min_std, image.shape)


@pytest.mark.parametrize("colour", [(0, 128, 128), (255, 0, 0), (12, 12, 12)])
def test_a_single_flat_colour_is_dropped_whatever_the_colour(colour) -> None:
    flat = np.full((300, 400, 3), colour, np.uint8)
    assert reason(encoded(flat, "PNG"), ImageRules()) == pixels.FLAT_COLOUR
    flat[299, 399] = (colour[0] ^ 1, colour[1], colour[2])  # one pixel of another colour: kept
    np.testing.assert_array_equal(pixels.decode(encoded(flat, "PNG"), rules=ImageRules()), flat)


def test_a_decompression_bomb_is_dropped_from_its_header() -> None:
    bomb = io.BytesIO()
    Image.new("1", (10_000, 10_000)).save(bomb, format="PNG")  # 100 megapixels in a few kilobytes
    assert len(bomb.getvalue()) < 100_000
    assert reason(bomb.getvalue(), ImageRules()) == pixels.TOO_MANY_PIXELS


def test_square_scales_the_shorter_side_and_crops_the_centre() -> None:
    photo = data.chelsea()  # 300 × 451
    out = pixels.square(photo, 64)
    assert out.shape == (64, 64, 3) and out.dtype == np.uint8
    up = pixels.square(photo[:100, :150], 128)  # enlarging
    assert up.shape == (128, 128, 3)
    scaled = pixels.scale_shorter_side(photo, 64)
    assert scaled.shape == (64, 96, 3)
    assert (pixels.crop(scaled, 64, left=0) == scaled[:, :64]).all()
    with pytest.raises(ValueError, match="leaves"):
        pixels.crop(scaled, 64, left=40)


@pytest.mark.parametrize("encoding", pixels.ENCODINGS)
def test_encoding_round_trips_and_is_deterministic(encoding) -> None:
    photo = pixels.square(data.astronaut(), 96)
    raw = pixels.encode(photo, encoding, quality=90)
    assert raw == pixels.encode(photo, encoding, quality=90)
    back = pixels.decode(raw)
    assert back.shape == photo.shape
    if encoding == "png":
        np.testing.assert_array_equal(back, photo)


def _jpegs() -> dict[str, bytes]:
    """JPEGs as Pillow and OpenCV write them: chroma layouts, progressive, greyscale, odd sides."""
    photo = data.astronaut()  # 512 × 512
    cv2 = pytest.importorskip("cv2")
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° to display": neither decoder turns the pixels
    return {
        "4:2:0": encoded(photo, "JPEG", quality=90),
        "exif orientation": encoded(photo, "JPEG", quality=90, exif=exif.tobytes()),
        "4:4:4": encoded(photo, "JPEG", quality=90, subsampling=0),
        "4:2:2": encoded(photo, "JPEG", quality=90, subsampling=1),
        "progressive": encoded(photo, "JPEG", quality=90, progressive=True),
        "grey": encoded(data.camera(), "JPEG", quality=90),
        "odd sides": encoded(data.chelsea()[:299, :451], "JPEG", quality=90),
        "opencv": cv2.imencode(".jpg", photo[..., ::-1], [cv2.IMWRITE_JPEG_QUALITY, 95])[1].tobytes(),
    }


@pytest.mark.parametrize("size", [40, 64, 100, 256, 600])
def test_a_whole_jpeg_decodes_under_opencv_to_exactly_what_pillow_draft_gives(size) -> None:
    for name, raw in _jpegs().items():
        fast = pixels.decode_whole_jpeg(raw, size=size)
        assert fast is not None, name
        np.testing.assert_array_equal(fast, pixels.decode(raw, size=size), err_msg=name)
        assert min(fast.shape[:2]) >= min(size, *pixels.image_size(raw)), name


def test_draft_scale_keeps_both_sides_covering_the_size() -> None:
    assert pixels.draft_scale(1024, 768, 256) == 2
    assert pixels.draft_scale(2048, 2048, 256) == 8
    assert pixels.draft_scale(4096, 1100, 256) == 4
    assert pixels.draft_scale(200, 300, 256) == 1


def test_only_whole_jpegs_take_the_opencv_path() -> None:
    jpeg = _jpegs()["4:2:0"]
    assert pixels.decode_whole_jpeg(jpeg + b"\0" * 100, size=64) is not None  # zero padding after the end marker
    for cut in (len(jpeg) // 2, len(jpeg) - 1, 300, 2, 0):
        assert pixels.decode_whole_jpeg(jpeg[:cut], size=64) is None, cut
    assert pixels.decode_whole_jpeg(jpeg + b"trailing junk", size=64) is None
    assert pixels.decode_whole_jpeg(encoded(data.astronaut(), "PNG"), size=64) is None
    cmyk = io.BytesIO()
    Image.fromarray(data.coffee()).convert("CMYK").save(cmyk, format="JPEG")
    assert pixels.decode_whole_jpeg(cmyk.getvalue(), size=64) is None  # four components: Pillow's conversion
    # A cut scan with an end marker put back reads as whole here, and OpenCV fills it in grey: only a
    # checksum tells such bytes from their writer's, which is why the readers ask for one. decode refuses it.
    forged = jpeg[: len(jpeg) // 2] + b"\xff\xd9"
    assert pixels.decode_whole_jpeg(forged, size=64) is not None
    with pytest.raises(ImageRejected) as cut:
        pixels.decode(forged, size=64)
    assert cut.value.reason == pixels.TRUNCATED
    with pytest.raises(ImageRejected) as error:
        pixels.decode_whole_jpeg(jpeg, size=64, rules=ImageRules(max_pixels=512 * 511))
    assert error.value.reason == pixels.TOO_MANY_PIXELS


def test_exif_orientation_is_not_applied_and_an_animation_gives_its_first_frame() -> None:
    """As docs/images.md says: every path takes the pixels as stored (the job, OnlineImages, the readers)."""
    rng = np.random.default_rng(5)
    first, second = (rng.integers(0, 256, (160, 200, 3), dtype=np.uint8) for _ in range(2))
    exif = Image.Exif()
    exif[0x0112] = 6  # "rotate 90° clockwise to display"
    out = io.BytesIO()
    Image.fromarray(first).save(out, "JPEG", quality=95, exif=exif.tobytes())
    jpeg = out.getvalue()
    assert pixels.decode(jpeg).shape == (160, 200, 3)
    np.testing.assert_array_equal(pixels.decode(jpeg), pixels.decode_whole_jpeg(jpeg, size=160))
    for fmt, lossless in (("PNG", True), ("GIF", False), ("TIFF", True), ("WEBP", True)):
        out = io.BytesIO()
        frames = [Image.fromarray(first), Image.fromarray(second)]
        frames[0].save(
            out, fmt, save_all=True, append_images=frames[1:], **({"lossless": True} if fmt == "WEBP" else {})
        )
        got = pixels.decode(out.getvalue())
        if lossless:
            np.testing.assert_array_equal(got, first, err_msg=fmt)
        else:  # a GIF's palette: nearer the first frame than the second
            assert np.abs(got.astype(int) - first).mean() < np.abs(got.astype(int) - second).mean() / 4, fmt


def _with_scans(jpeg: bytes, scans: int) -> bytes:
    """A progressive JPEG whose last scan is repeated until the file holds `scans` start-of-scan markers."""
    last, end = jpeg.rindex(b"\xff\xda"), jpeg.rindex(b"\xff\xd9")
    extra = scans - jpeg.count(b"\xff\xda")
    assert extra >= 0
    return jpeg[:end] + jpeg[last:end] * extra + jpeg[end:]


def test_a_jpeg_of_more_scans_than_the_limit_is_refused_before_it_is_decoded() -> None:
    """Each scan of a progressive JPEG is a pass over the whole image's coefficients, so a small file of
    thousands of scans is a CPU bomb: it is refused by its marker count, naming it; a JPEG at the limit is
    not refused for its scans."""
    progressive = encoded(data.astronaut(), "JPEG", quality=90, progressive=True)
    assert 1 < progressive.count(b"\xff\xda") < 20
    assert pixels.decode(progressive).shape == (512, 512, 3)
    bomb = _with_scans(progressive, pixels.MAX_JPEG_SCANS + 1)
    with pytest.raises(ImageRejected) as refused:
        pixels.decode(bomb)
    assert refused.value.reason == pixels.UNDECODABLE
    assert f"{pixels.MAX_JPEG_SCANS + 1} scans" in str(refused.value)
    at_limit = _with_scans(progressive, pixels.MAX_JPEG_SCANS)
    try:
        pixels.decode(at_limit)
    except ImageRejected as error:  # libjpeg may refuse a repeated refinement scan on its own grounds
        assert "scans, more than" not in str(error)


def test_an_eps_file_is_undecodable_and_never_handed_to_ghostscript(tmp_path, monkeypatch) -> None:
    """Pillow renders EPS by running Ghostscript on the file's PostScript: a url's or a row's bytes would
    run as a program wherever `gs` is installed (and decode there, but be undecodable elsewhere), and a
    `gs` that fails raised CalledProcessError, which no caller counts. No image path of dew reads EPS."""
    from PIL import EpsImagePlugin

    ran = tmp_path / "gs-ran"
    gs = tmp_path / "bin" / "gs"
    gs.parent.mkdir()
    gs.write_text(f'#!/bin/sh\n[ "$1" = --version ] && echo 10.02.1 && exit 0\ntouch {ran}\nexit 1\n')
    gs.chmod(0o755)
    monkeypatch.setenv("PATH", f"{gs.parent}:{__import__('os').environ['PATH']}")
    monkeypatch.setattr(EpsImagePlugin, "gs_binary", None)  # looked up again, on this PATH
    eps = encoded(data.astronaut()[:200, :200], "EPS")
    assert Image.open(io.BytesIO(eps)).format == "EPS"  # what Pillow makes of the bytes unasked
    assert reason(eps) == pixels.UNDECODABLE
    with pytest.raises(ImageRejected):
        pixels.image_size(eps)
    assert not ran.exists()


def test_a_damaged_avif_is_undecodable_never_an_error_that_ends_the_job() -> None:
    """Pillow's AVIF plugin raises RuntimeError for damaged data ("Failed to decode frame 0: Decoding of
    color planes failed"), which no caller counted: one such row or url ended the images or ingest-urls job."""
    avif = encoded(data.astronaut()[:64, :64], "AVIF")
    assert pixels.decode(avif).shape == (64, 64, 3)
    reasons = set()
    for at in range(len(avif)):  # every byte zeroed in turn: an image, or dropped with a reason
        damaged = bytearray(avif)
        damaged[at] = 0
        try:
            pixels.decode(bytes(damaged))
        except ImageRejected as rejected:
            reasons.add(rejected.reason)
    assert pixels.UNDECODABLE in reasons


def test_sixteen_bit_grey_is_read_on_its_own_scale_as_opencv_reads_it() -> None:
    """A 16-bit PNG's values are sixteenths of 65535: one whose brightest value is 255 is nearly black.
    dew scaled 16-bit grey down only when some value was over 255, so that image came out bright and one
    peaking at 256 dark. It now reads every 16-bit grey image as OpenCV does (the top 8 bits)."""
    import cv2
    from PIL import Image

    for peak in (255, 256, 65535):
        grey = np.linspace(0, peak, 64 * 48).astype(np.uint16).reshape(48, 64)
        buffer = io.BytesIO()
        Image.fromarray(grey).save(buffer, format="PNG")
        data = buffer.getvalue()
        want = cv2.cvtColor(cv2.imdecode(np.frombuffer(data, np.uint8), cv2.IMREAD_COLOR), cv2.COLOR_BGR2RGB)
        np.testing.assert_array_equal(pixels.decode(data), want, err_msg=f"peak {peak}")

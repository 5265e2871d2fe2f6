"""One decode holds at most 4 bytes a pixel of the decoded image plus 64 MB, whatever the rules check,
and gives exactly the pixels Pillow's own conversion gives, in every mode."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap
from collections.abc import Callable

import numpy as np
import pytest

from dew.data.images import pixel_buffer, pixels
from dew.data.images.pixels import ImageRejected, ImageRules

cv2 = pytest.importorskip("cv2")
Image = pytest.importorskip("PIL.Image")

SIDE = 5000  # 25 megapixels: the old decode's 10 (and flat check's 27) bytes a pixel are far over the bound
BOUND_BYTES_A_PIXEL = 4
BOUND_CONSTANT = 64 << 20


def saved(image, fmt: str, **options) -> bytes:
    buffer = io.BytesIO()
    image.save(buffer, format=fmt, **options)
    return buffer.getvalue()


def reference_rgb(image) -> np.ndarray:
    """dew's conversion before the bounded buffer, kept here as it was (float compositing, whole images)."""
    mode = image.mode
    if mode in ("I;16", "I;16L", "I;16B", "I"):
        grey: np.ndarray = np.asarray(image).astype(np.uint32)
        # 16-bit grey is on its format's 0..65535 scale; 32-bit grey ("I") names none, so is guessed.
        grey = (grey >> 8) if mode != "I" or bool(grey.max(initial=0) > 255) else grey
        return np.repeat(grey.astype(np.uint8)[..., None], 3, axis=2)
    if mode in ("RGBA", "LA", "PA") or (mode == "P" and "transparency" in image.info):
        rgba = np.asarray(image.convert("RGBA")).astype(np.float32)
        alpha = rgba[..., 3:] / 255.0
        return np.rint(rgba[..., :3] * alpha + 255.0 * (1.0 - alpha)).astype(np.uint8)
    if mode == "RGB":
        return np.asarray(image)
    return np.ascontiguousarray(np.asarray(image.convert("RGB")))


def plain_rgb(raw: bytes, size: int | None = None) -> np.ndarray:
    """What decode gave before the bounded buffer: Pillow loads its own image, then converts it whole."""
    image = Image.open(io.BytesIO(raw))
    if size is not None and image.format == "JPEG":
        image.draft("RGB", (size, size))
    image.load()
    return reference_rgb(image)


def animated_webp(rgb: np.ndarray, **options) -> bytes:
    frames = [Image.fromarray(rgb), Image.fromarray(rgb[::-1].copy())]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:], duration=100, **options)
    return out.getvalue()


def every_mode() -> dict[str, bytes]:
    rng = np.random.default_rng(3)
    rgb = rng.integers(0, 256, (203, 157, 3), dtype=np.uint8)
    rgba = np.dstack([rgb, rng.integers(0, 256, (203, 157), dtype=np.uint8)])
    grey = rgb[..., 0]
    palette = Image.fromarray(rgb).quantize(colors=50)
    transparent = palette.copy()
    transparent.info["transparency"] = 7
    wide = (rng.integers(0, 65536, (203, 157))).astype(np.uint16)
    narrow = (rng.integers(0, 256, (203, 157))).astype(np.uint16)  # a dark 16-bit image; as 32-bit, not scaled
    return {
        "rgb png": saved(Image.fromarray(rgb), "PNG"),
        "rgb png interlaced": cv2.imencode(".png", rgb)[1].tobytes(),
        "rgb jpeg": saved(Image.fromarray(rgb), "JPEG", quality=90),
        "rgba png": saved(Image.fromarray(rgba), "PNG"),
        "grey png": saved(Image.fromarray(grey), "PNG"),
        "grey jpeg": saved(Image.fromarray(grey), "JPEG"),
        "palette png": saved(palette, "PNG"),
        "palette with transparency": saved(transparent, "PNG", transparency=7),
        "cmyk jpeg": saved(Image.fromarray(rgb).convert("CMYK"), "JPEG"),
        "16-bit grey png": saved(Image.fromarray(wide), "PNG"),
        "16-bit grey, dark": saved(Image.fromarray(narrow), "PNG"),
        "16-bit rgb png": cv2.imencode(".png", (rgb.astype(np.uint16) * 257)[..., ::-1])[1].tobytes(),
        "bilevel png": saved(Image.fromarray(grey > 128), "PNG"),
        "grey alpha png": saved(Image.fromarray(np.dstack([grey, grey[::-1]])), "PNG"),
        "webp": saved(Image.fromarray(rgb), "WEBP", quality=80),
        "webp lossless": saved(Image.fromarray(rgb), "WEBP", lossless=True),
        "webp with alpha": saved(Image.fromarray(rgba), "WEBP", quality=80),
        "webp lossless with alpha": saved(Image.fromarray(rgba), "WEBP", lossless=True),
        "animated webp": animated_webp(rgb),
        "animated webp with alpha": animated_webp(rgba),
        "animated webp lossless with alpha": animated_webp(rgba, lossless=True),
        "32-bit grey tiff": saved(Image.fromarray(wide.astype(np.int32)), "TIFF"),
        "32-bit grey tiff of 8-bit values": saved(Image.fromarray(narrow.astype(np.int32)), "TIFF"),
        "palette with an opacity an entry": saved(palette, "PNG", transparency=bytes(range(0, 250, 5))),
        "gif": saved(palette, "GIF"),
        "gif with transparency": saved(transparent, "GIF", transparency=7),
        "bmp": saved(Image.fromarray(rgb), "BMP"),
        "tiff": saved(Image.fromarray(rgb), "TIFF"),
        "tiff rgba": saved(Image.fromarray(rgba), "TIFF", compression="tiff_lzw"),
    }


def test_every_mode_decodes_to_the_pixels_pillows_conversion_gives(monkeypatch) -> None:
    monkeypatch.setattr(pixel_buffer, "_STRIP_BYTES", 1000)  # many strips: every boundary is crossed
    for name, raw in every_mode().items():
        want = plain_rgb(raw)
        got = pixels.decode(raw)
        assert got.flags.c_contiguous and got.dtype == np.uint8 and got.shape == (*want.shape[:2], 3), name
        np.testing.assert_array_equal(got, want, err_msg=name)
    jpeg = every_mode()["rgb jpeg"]
    np.testing.assert_array_equal(pixels.decode(jpeg, size=50), plain_rgb(jpeg, size=50))  # a draft scale


def test_a_truncated_file_still_names_its_reason_through_the_buffer() -> None:
    raw = every_mode()["rgb png"]
    with pytest.raises(ImageRejected) as error:
        pixels.decode(raw[: len(raw) // 2])
    assert error.value.reason in (pixels.TRUNCATED, pixels.UNDECODABLE)
    jpeg = every_mode()["rgb jpeg"]
    with pytest.raises(ImageRejected) as error:
        pixels.decode(jpeg[: len(jpeg) // 2])
    assert error.value.reason == pixels.TRUNCATED


_MEASURE = textwrap.dedent(
    """
    import json, sys
    from dew.data.images import pixels

    def high_water():
        # VmHWM, not ru_maxrss: Linux carries ru_maxrss across fork and exec, so a child of a large pytest
        # process would start at its parent's peak and show no growth at all.
        for line in open("/proc/self/status"):
            if line.startswith("VmHWM:"):
                return int(line.split()[1]) * 1024
        raise RuntimeError("no VmHWM in /proc/self/status")

    raw, warm = open(sys.argv[1], "rb").read(), open(sys.argv[2], "rb").read()
    rules = pixels.ImageRules(max_pixels=10**9)
    pixels.decode(warm, rules=rules)  # libraries loaded and plugins registered before the baseline
    base = high_water()
    try:
        image = pixels.decode(raw, rules=rules)
        kept = list(image.shape)
    except pixels.ImageRejected as rejected:
        kept = rejected.reason
    peak = high_water()
    print(json.dumps({"grown": peak - base, "kept": kept}))
    """
)


def _noisy(channels: int = 3) -> np.ndarray:
    return np.random.default_rng(0).integers(0, 256, (SIDE, SIDE, channels), dtype=np.uint8)


_PNG = [cv2.IMWRITE_PNG_COMPRESSION, 1]


def _palette_with_alpha() -> bytes:
    """Mode P with a tRNS chunk giving every palette entry its own opacity."""
    image = Image.fromarray(_noisy(1)[..., 0], "L").convert("P")
    image.putpalette(np.random.default_rng(1).integers(0, 256, 768, dtype=np.uint8).tobytes())
    return saved(image, "PNG", transparency=bytes(range(256)), compress_level=1)


def _animated_webp() -> bytes:
    noisy = _noisy()
    frames = [Image.fromarray(noisy), Image.fromarray(noisy[::-1].copy())]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:], duration=100, quality=50, method=0)
    return out.getvalue()


# name → (what the file holds, its extension); each is built only for its own case.
BIG: dict[str, tuple[Callable[[], bytes], str]] = {
    "flat grey png": (lambda: cv2.imencode(".png", np.full((SIDE, SIDE, 3), 90, np.uint8))[1].tobytes(), "png"),
    "flat teal png": (
        lambda: cv2.imencode(".png", np.full((SIDE, SIDE, 3), (128, 128, 0), np.uint8))[1].tobytes(),
        "png",
    ),
    "noisy png": (lambda: cv2.imencode(".png", _noisy(), _PNG)[1].tobytes(), "png"),
    "noisy jpeg": (lambda: cv2.imencode(".jpg", _noisy(), [cv2.IMWRITE_JPEG_QUALITY, 75])[1].tobytes(), "jpg"),
    # Progressive: libjpeg holds every DCT coefficient of the image (2 bytes a sample) until the last scan.
    "noisy progressive jpeg": (
        lambda: cv2.imencode(
            ".jpg",
            _noisy(),
            [
                cv2.IMWRITE_JPEG_QUALITY,
                75,
                cv2.IMWRITE_JPEG_PROGRESSIVE,
                1,
                cv2.IMWRITE_JPEG_SAMPLING_FACTOR,
                cv2.IMWRITE_JPEG_SAMPLING_FACTOR_444,
            ],
        )[1].tobytes(),
        "jpg",
    ),
    "noisy cmyk jpeg": (lambda: saved(Image.fromarray(_noisy(4), "CMYK"), "JPEG", quality=75), "jpg"),
    "noisy rgba png": (lambda: cv2.imencode(".png", _noisy(4), _PNG)[1].tobytes(), "png"),
    "noisy grey png": (lambda: cv2.imencode(".png", _noisy(1), _PNG)[1].tobytes(), "png"),
    "noisy grey alpha png": (lambda: saved(Image.fromarray(_noisy(2), "LA"), "PNG", compress_level=1), "png"),
    "noisy palette png with transparency": (_palette_with_alpha, "png"),
    "noisy 16-bit grey png": (
        lambda: cv2.imencode(".png", _noisy(2).view(np.uint16)[..., 0], _PNG)[1].tobytes(),
        "png",
    ),
    "noisy 32-bit grey tiff": (
        lambda: saved(Image.fromarray(_noisy(2).view(np.uint16)[..., 0].astype(np.int32)), "TIFF"),
        "tif",
    ),
    "noisy webp": (lambda: cv2.imencode(".webp", _noisy(), [cv2.IMWRITE_WEBP_QUALITY, 75])[1].tobytes(), "webp"),
    "noisy webp with alpha": (lambda: saved(Image.fromarray(_noisy(4)), "WEBP", quality=50, method=0), "webp"),
    # libwebp's own state (docs/images.md) sets these two their own bound: LOOSER.
    "noisy webp lossless": (
        lambda: saved(Image.fromarray(_noisy()), "WEBP", lossless=True, quality=0, method=0),
        "webp",
    ),
    "noisy webp lossless with alpha": (
        lambda: saved(Image.fromarray(_noisy(4)), "WEBP", lossless=True, quality=0, method=0),
        "webp",
    ),
    "noisy animated webp": (_animated_webp, "webp"),
    "noisy float tiff": (lambda: saved(Image.fromarray(_noisy(4).view(np.float32)[..., 0]), "TIFF"), "tif"),
    "noisy gif": (lambda: saved(Image.fromarray(_noisy(1)[..., 0] >> 2, "L").convert("P"), "GIF"), "gif"),
}


# Bytes a pixel where libwebp itself holds more than dew's buffer: a lossless image's whole ARGB (4 bytes a
# pixel) beside the RGB (3), for the whole decode. (A lossy image's alpha plane, 1 byte a pixel, fits the
# bound beside the RGB: the RGBA it is decoded as is composited onto white, and returned, as rows come out.)
# A progressive JPEG adds libjpeg's coefficient buffer of the whole image, 2 bytes a sample: 6 bytes a pixel
# at 4:4:4 (tested, the worst), 3 at 4:2:0, at any draft scale.
LOOSER = {"noisy webp lossless": 7, "noisy webp lossless with alpha": 7, "noisy progressive jpeg": 4 + 6}


def measure(raw: bytes, ext: str, tmp_path) -> dict:
    """{"grown": peak RSS growth of one decode in a fresh process, "kept": its shape or the reason}."""
    warm = tmp_path / "warm.png"
    photo = np.random.default_rng(1).integers(0, 256, (200, 200, 3), dtype=np.uint8)
    warm.write_bytes(cv2.imencode(".png", photo)[1].tobytes())
    path = tmp_path / f"big.{ext}"
    path.write_bytes(raw)
    run = subprocess.run(
        [sys.executable, "-c", _MEASURE, str(path), str(warm)], capture_output=True, text=True, timeout=300
    )
    assert run.returncode == 0, run.stderr
    return json.loads(run.stdout)


@pytest.mark.parametrize("name", list(BIG))
def test_peak_memory_of_one_decode_is_bounded_by_the_decoded_image(tmp_path, name) -> None:
    build, ext = BIG[name]
    measured = measure(build(), ext, tmp_path)
    if name.startswith("noisy float"):  # no RGB reading: dropped from its header, before a pixel is decoded
        assert measured["kept"] == pixels.NOT_RGB, name
        assert measured["grown"] <= BOUND_CONSTANT, f"{name}: {measured['grown']} bytes for a dropped image"
        return
    assert measured["kept"] == (pixels.FLAT_COLOUR if name.startswith("flat") else [SIDE, SIDE, 3]), name
    bound = LOOSER.get(name, BOUND_BYTES_A_PIXEL) * SIDE * SIDE + BOUND_CONSTANT
    assert measured["grown"] <= bound, f"{name}: {measured['grown'] / SIDE / SIDE:.2f} bytes a pixel"
    # The decoded image itself (3 bytes a pixel, grey's buffer included) is seen: the measure is live.
    assert measured["grown"] >= 2.5 * SIDE * SIDE, f"{name}: only {measured['grown']} bytes measured"


def test_the_flat_check_allocates_strips_not_copies_of_the_image() -> None:
    # The exact statistic (a bound no single pixel settles) on an image of a million pixels.
    image = np.full((1000, 1000, 3), 40, np.uint8)
    image[::2, ::2, 1] = 41
    assert not pixel_buffer.is_flat(image, 0.4)
    assert pixel_buffer.is_flat(image, 0.5)
    want = float(image.reshape(-1, 3).std(axis=0).max())
    assert 0.4 < want < 0.5
    with pytest.raises(ImageRejected):
        ImageRules(min_std=0.5).check_pixels(image)


def test_every_webp_takes_libwebps_own_buffer_and_an_animation_its_first_frame() -> None:
    from dew.data.images import webp_buffer

    modes = every_mode()
    names = ("webp", "webp lossless", "webp with alpha", "webp lossless with alpha")
    animations = ("animated webp", "animated webp with alpha", "animated webp lossless with alpha")
    for name in (*names, *animations):
        image = Image.open(io.BytesIO(modes[name]))
        assert getattr(image, "is_animated", False) == (name in animations), name
        got = webp_buffer.decode_rgb(modes[name], *image.size, alpha=image.mode == "RGBA", strip_bytes=1000)
        assert got is not None, f"{name} fell back to Pillow"
        np.testing.assert_array_equal(got, plain_rgb(modes[name]), err_msg=name)
    cut = modes["webp"][: len(modes["webp"]) // 2]  # refused by libwebp: Pillow's decode then names the damage
    assert webp_buffer.decode_rgb(cut, 157, 203, alpha=False, strip_bytes=1000) is None
    # An animation's first frame is cut out with where it lies: here over the whole 157 × 203 canvas.
    first = webp_buffer.first_frame(modes["animated webp"])
    assert first is not None and (first.x, first.y, first.width, first.height) == (0, 0, 157, 203)


def test_compositing_onto_white_in_integers_gives_the_float_arithmetics_byte_for_every_pair() -> None:
    from dew.data.images import rgb_strips

    colour, alpha = np.meshgrid(np.arange(256, dtype=np.uint8), np.arange(256, dtype=np.uint8))
    rgba = np.stack([colour, colour, colour, alpha], axis=-1)
    want = reference_rgb(Image.fromarray(rgba, "RGBA"))
    np.testing.assert_array_equal(rgb_strips.on_white(rgba[..., :3], rgba[..., 3:]), want)


def test_modes_without_an_rgb_reading_are_dropped_as_not_rgb() -> None:
    grey = np.arange(40000, dtype=np.int64).reshape(200, 200)
    for values in (grey - 1, grey + 30000):  # 32-bit grey outside 0..65535: no grey image holds that
        with pytest.raises(ImageRejected) as error:
            pixels.decode(saved(Image.fromarray(values.astype(np.int32)), "TIFF"))
        assert error.value.reason == pixels.NOT_RGB
    with pytest.raises(ImageRejected) as error:
        pixels.decode(saved(Image.fromarray(grey.astype(np.float32)), "TIFF"))
    assert error.value.reason == pixels.NOT_RGB and "'F'" in str(error.value)


def test_a_webp_is_opened_where_its_bytes_lie_not_by_pillows_copy(monkeypatch) -> None:
    from PIL import WebPImagePlugin

    modes = every_mode()
    names = [name for name in modes if "webp" in name]
    wants = {name: plain_rgb(modes[name]) for name in names}
    monkeypatch.setattr(pixel_buffer, "_STRIP_BYTES", 1000)  # many strips and many incremental steps

    def refused(self):
        raise AssertionError("Pillow's WebP open (a copy of the whole file) was used")

    monkeypatch.setattr(WebPImagePlugin.WebPImageFile, "_open", refused)
    for name in names:
        np.testing.assert_array_equal(pixels.decode(modes[name]), wants[name], err_msg=name)
    with pytest.raises(ImageRejected) as error:
        pixels.decode(modes["webp with alpha"], convert=False)
    assert error.value.reason == pixels.NOT_RGB
    with pytest.raises(ImageRejected) as error:
        pixels.decode(modes["webp"], rules=ImageRules(max_pixels=100))
    assert error.value.reason == pixels.TOO_MANY_PIXELS


def test_a_cut_webp_with_alpha_still_names_its_reason() -> None:
    raw = every_mode()["webp with alpha"]
    for cut in (raw[: len(raw) // 2], raw[: len(raw) - 10]):
        with pytest.raises(ImageRejected) as error:
            pixels.decode(cut)
        assert error.value.reason in (pixels.TRUNCATED, pixels.UNDECODABLE)

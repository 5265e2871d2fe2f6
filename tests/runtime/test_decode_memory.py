"""One decode holds at most 4 bytes a pixel of the decoded image plus 64 MB, whatever the rules check,
and gives exactly the pixels Pillow's own conversion gives, in every mode."""

from __future__ import annotations

import io
import json
import subprocess
import sys
import textwrap

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


def plain_rgb(raw: bytes, size: int | None = None) -> np.ndarray:
    """What decode gave before the bounded buffer: Pillow loads its own image, then converts it whole."""
    image = Image.open(io.BytesIO(raw))
    if size is not None and image.format == "JPEG":
        image.draft("RGB", (size, size))
    image.load()
    return pixel_buffer.rgb(image)


def animated_webp(rgb: np.ndarray) -> bytes:
    frames = [Image.fromarray(rgb), Image.fromarray(rgb[::-1].copy())]
    out = io.BytesIO()
    frames[0].save(out, "WEBP", save_all=True, append_images=frames[1:], duration=100)
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
    narrow = (rng.integers(0, 256, (203, 157))).astype(np.uint16)  # 16-bit storage, 8-bit values: not scaled
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
        "16-bit grey of 8-bit values": saved(Image.fromarray(narrow), "PNG"),
        "16-bit rgb png": cv2.imencode(".png", (rgb.astype(np.uint16) * 257)[..., ::-1])[1].tobytes(),
        "bilevel png": saved(Image.fromarray(grey > 128), "PNG"),
        "grey alpha png": saved(Image.fromarray(np.dstack([grey, grey[::-1]])), "PNG"),
        "webp": saved(Image.fromarray(rgb), "WEBP", quality=80),
        "webp lossless": saved(Image.fromarray(rgb), "WEBP", lossless=True),
        "webp with alpha": saved(Image.fromarray(rgba), "WEBP", quality=80),
        "webp lossless with alpha": saved(Image.fromarray(rgba), "WEBP", lossless=True),
        "animated webp": animated_webp(rgb),
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


def big_images() -> dict[str, tuple[bytes, str]]:
    rng = np.random.default_rng(0)
    noisy = rng.integers(0, 256, (SIDE, SIDE, 3), dtype=np.uint8)
    png = [cv2.IMWRITE_PNG_COMPRESSION, 1]
    return {
        "flat grey png": (cv2.imencode(".png", np.full((SIDE, SIDE, 3), 90, np.uint8))[1].tobytes(), "png"),
        "flat teal png": (cv2.imencode(".png", np.full((SIDE, SIDE, 3), (128, 128, 0), np.uint8))[1].tobytes(), "png"),
        "noisy png": (cv2.imencode(".png", noisy, png)[1].tobytes(), "png"),
        "noisy jpeg": (cv2.imencode(".jpg", noisy, [cv2.IMWRITE_JPEG_QUALITY, 75])[1].tobytes(), "jpg"),
        "noisy rgba png": (cv2.imencode(".png", np.dstack([noisy, noisy[..., 0]]), png)[1].tobytes(), "png"),
        "noisy grey png": (cv2.imencode(".png", noisy[..., 0], png)[1].tobytes(), "png"),
        "noisy webp": (cv2.imencode(".webp", noisy, [cv2.IMWRITE_WEBP_QUALITY, 75])[1].tobytes(), "webp"),
        "noisy gif": (saved(Image.fromarray(noisy[..., 0] >> 2, "L").convert("P"), "GIF"), "gif"),
    }


def test_peak_memory_of_one_decode_is_bounded_by_the_decoded_image(tmp_path) -> None:
    warm = tmp_path / "warm"
    photo = np.random.default_rng(1).integers(0, 256, (200, 200, 3), dtype=np.uint8)
    warm.write_bytes(cv2.imencode(".png", photo)[1].tobytes())
    bound = BOUND_BYTES_A_PIXEL * SIDE * SIDE + BOUND_CONSTANT
    for name, (raw, ext) in big_images().items():
        path = tmp_path / f"big.{ext}"
        path.write_bytes(raw)
        run = subprocess.run(
            [sys.executable, "-c", _MEASURE, str(path), str(warm)], capture_output=True, text=True, timeout=300
        )
        assert run.returncode == 0, run.stderr
        measured = json.loads(run.stdout)
        assert measured["kept"] == (pixels.FLAT_COLOUR if name.startswith("flat") else [SIDE, SIDE, 3]), name
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


def test_still_webps_take_libwebps_own_buffer_and_animated_ones_pillow() -> None:
    from dew.data.images import webp_buffer

    modes = every_mode()
    for name in ("webp", "webp lossless", "webp with alpha", "webp lossless with alpha"):
        image = Image.open(io.BytesIO(modes[name]))
        got = webp_buffer.decode_rgb(modes[name], *image.size, alpha=image.mode == "RGBA", strip_bytes=1000)
        assert got is not None, f"{name} fell back to Pillow"
        np.testing.assert_array_equal(got, plain_rgb(modes[name]), err_msg=name)
    animated = Image.open(io.BytesIO(modes["animated webp"]))
    assert animated.is_animated  # decoded by Pillow, first frame: the simple decoder reads stills only
    cut = modes["webp"][: len(modes["webp"]) // 2]  # refused by libwebp: Pillow's decode then names the damage
    assert webp_buffer.decode_rgb(cut, 157, 203, alpha=False, strip_bytes=1000) is None

"""An animated WebP whose first frame is smaller than its canvas decodes into dew's own canvas-sized
buffer, pixel for pixel as Pillow's animation decoder draws it, within the decode-memory bound.

Pillow writes every animation's first frame over the whole canvas, so these files are put together
here chunk by chunk: each frame is a still WebP Pillow encodes, its chunks moved into an ANMF chunk."""

from __future__ import annotations

import io
import struct

import numpy as np
import pytest

from dew.data.images import pixels, webp_buffer
from dew.data.images.pixels import ImageRejected
from tests.runtime.test_decode_memory import BOUND_BYTES_A_PIXEL, BOUND_CONSTANT, SIDE, measure, plain_rgb

Image = pytest.importorskip("PIL.Image")
pytest.importorskip("cv2")


def _chunk(fourcc: bytes, payload: bytes) -> bytes:
    return fourcc + struct.pack("<I", len(payload)) + payload + b"\0" * (len(payload) & 1)


def still(array: np.ndarray, **options) -> bytes:
    out = io.BytesIO()
    Image.fromarray(array).save(out, "WEBP", **options)
    return out.getvalue()


def frame_chunks(webp: bytes) -> bytes:
    """A still WebP's image chunks (ALPH and VP8, or VP8L), as an ANMF chunk holds them."""
    found, at = [], 12
    while at + 8 <= len(webp):
        name, size = webp[at : at + 4], struct.unpack_from("<I", webp, at + 4)[0]
        if name != b"VP8X":
            found.append(_chunk(name, webp[at + 8 : at + 8 + size]))
        at += 8 + size + (size & 1)
    return b"".join(found)


def animation(canvas: tuple[int, int], frames: list[tuple[int, int, bytes]], *, alpha: bool, flags: int = 0) -> bytes:
    """An animated WebP of `canvas` (width, height) holding each (x, y, still WebP) as a frame at
    (2x, 2y): ANMF offsets are stored halved. `flags` is each frame's blend and dispose bits."""
    width, height = canvas
    header = bytes([0x02 | (0x10 if alpha else 0), 0, 0, 0]) + (width - 1).to_bytes(3, "little")
    body = _chunk(b"VP8X", header + (height - 1).to_bytes(3, "little"))
    body += _chunk(b"ANIM", bytes([200, 100, 50, 255]) + b"\0\0")  # an opaque background, never drawn
    for x, y, frame in frames:
        w, h = Image.open(io.BytesIO(frame)).size
        place = b"".join(v.to_bytes(3, "little") for v in (x, y, w - 1, h - 1, 100)) + bytes([flags])
        body += _chunk(b"ANMF", place + frame_chunks(frame))
    return b"RIFF" + struct.pack("<I", 4 + len(body)) + b"WEBP" + body


def _noisy(height: int, width: int, channels: int, seed: int = 0) -> np.ndarray:
    return np.random.default_rng(seed).integers(0, 256, (height, width, channels), dtype=np.uint8)


def big_inside_canvas(*, alpha: bool) -> bytes:
    """A 5000 × 5000 animation whose first frame, 4800 × 4900, lies at (100, 50)."""
    frame = still(_noisy(4900, 4800, 4 if alpha else 3), quality=50, method=0)
    second = still(_noisy(16, 16, 4 if alpha else 3, seed=1), quality=50)
    return animation((SIDE, SIDE), [(50, 25, frame), (0, 0, second)], alpha=alpha)


CANVAS = (101, 77)
FRAME = (45, 31)
# (x, y) as ANMF stores them, halved: odd offsets, the top-left corner, and the bottom-right one exactly.
PLACES = {"odd offsets": (3, 5), "top left": (0, 0), "bottom right corner": (28, 23)}
KINDS = {
    "lossy": ({"quality": 80}, 3, False),
    "lossless": ({"lossless": True}, 3, False),
    "lossy with alpha": ({"quality": 80}, 4, True),
    "lossless with alpha": ({"lossless": True}, 4, True),
    # A frame with an alpha plane in a file flagged opaque: Pillow reads it as RGB, its alpha unused.
    "lossy alpha plane, file opaque": ({"quality": 80}, 4, False),
}


def inside_canvas(kind: str, place: str, flags: int = 0) -> tuple[bytes, bool]:
    """(the animation, whether Pillow opens it as RGBA)."""
    options, channels, alpha = KINDS[kind]
    x, y = PLACES[place]
    first = still(_noisy(FRAME[1], FRAME[0], channels), **options)
    second = still(_noisy(CANVAS[1], CANVAS[0], channels, seed=1), **options)  # covers the first entirely
    return animation(CANVAS, [(x, y, first), (0, 0, second)], alpha=alpha, flags=flags), alpha


@pytest.fixture
def refuse_pillows_decode(monkeypatch):
    """Called, lets Pillow open a WebP (its size and mode) but not decode one: a fallback fails loudly."""
    from PIL import WebPImagePlugin

    def refused(self):
        raise AssertionError("Pillow's animation decoder was used")

    return lambda: monkeypatch.setattr(WebPImagePlugin.WebPImageFile, "load", refused)


@pytest.mark.parametrize("place", list(PLACES))
@pytest.mark.parametrize("kind", list(KINDS))
def test_a_first_frame_smaller_than_its_canvas_gives_pillows_pixels_from_dews_buffer(kind, place) -> None:
    raw, alpha = inside_canvas(kind, place)
    image = Image.open(io.BytesIO(raw))
    assert image.size == CANVAS and image.is_animated and (image.mode == "RGBA") == alpha
    want = plain_rgb(raw)  # Pillow's animation decoder's first frame, converted as dew converted it
    got = webp_buffer.decode_rgb(raw, *CANVAS, alpha=alpha, strip_bytes=1000)  # many strips
    assert got is not None, f"{kind} at {place} fell back to Pillow"
    assert got.flags.c_contiguous and got.dtype == np.uint8
    np.testing.assert_array_equal(got, want, err_msg=f"{kind} at {place}")
    # Outside the frame the canvas is transparent black: white once composited, black read as RGB.
    assert int(want[0, -1].min() if alpha else want[0, -1].max()) == (255 if alpha else 0)


@pytest.mark.parametrize("flags", [0, 1, 2, 3])
def test_the_first_frames_blend_and_dispose_bits_and_the_background_change_nothing(flags, refuse_pillows_decode):
    raw, _ = inside_canvas("lossy with alpha", "odd offsets", flags=flags)
    want = plain_rgb(raw)
    np.testing.assert_array_equal(want, plain_rgb(inside_canvas("lossy with alpha", "odd offsets")[0]))
    refuse_pillows_decode()
    np.testing.assert_array_equal(pixels.decode(raw), want)


def test_pixels_decode_takes_the_sub_canvas_frame_without_pillows_decoder(refuse_pillows_decode) -> None:
    cases = {(kind, place): inside_canvas(kind, place)[0] for kind in KINDS for place in PLACES}
    wants = {case: plain_rgb(raw) for case, raw in cases.items()}
    refuse_pillows_decode()
    for case, raw in cases.items():
        np.testing.assert_array_equal(pixels.decode(raw), wants[case], err_msg=str(case))


@pytest.mark.parametrize("place", [(29, 0), (0, 24), (50, 50)])
def test_a_first_frame_reaching_past_its_canvas_is_undecodable(place) -> None:
    first = still(_noisy(FRAME[1], FRAME[0], 3), quality=80)
    raw = animation(CANVAS, [(*place, first), (0, 0, first)], alpha=False)
    with pytest.raises(ImageRejected) as error:
        webp_buffer.decode_rgb(raw, *CANVAS, alpha=False, strip_bytes=1000)
    assert error.value.reason == pixels.UNDECODABLE
    with pytest.raises(ImageRejected) as error:
        pixels.decode(raw)  # Pillow refuses to open it: the same reason, never a crash
    assert error.value.reason == pixels.UNDECODABLE


@pytest.mark.parametrize("alpha", [False, True], ids=["opaque", "with alpha"])
def test_peak_memory_of_a_sub_canvas_first_frame_is_bounded_by_the_canvas(tmp_path, alpha) -> None:
    measured = measure(big_inside_canvas(alpha=alpha), "webp", tmp_path)
    assert measured["kept"] == [SIDE, SIDE, 3]
    bound = BOUND_BYTES_A_PIXEL * SIDE * SIDE + BOUND_CONSTANT
    assert measured["grown"] <= bound, f"{measured['grown'] / SIDE / SIDE:.2f} bytes a pixel"
    assert measured["grown"] >= 2.5 * SIDE * SIDE, f"only {measured['grown']} bytes measured"

"""The images and the bytes of answers the hostile servers (tests/hostile_http.py) are made of.

Image i is its own crop of one of four skimage.data photographs, JPEG for even i and PNG for odd, so bytes
and pixels differ from url to url and a record holding another url's image is told apart: the first 64 are
crops 7 px apart, the next 64 the same crops mirrored left to right, the last 64 mirrored top to bottom.
"""

from __future__ import annotations

import functools
import io

import numpy as np

IMAGES = 192  # image i exists for i < IMAGES; every url of a test gets its own i
SIDES = (176, 208)  # height, width of every image
_CROPS = 64


@functools.cache
def image(i: int) -> bytes:
    """Image i: its own 208 × 176 crop of one of four photographs, JPEG (even i) or PNG (odd i)."""
    from PIL import Image
    from skimage import data

    if not 0 <= i < IMAGES:
        raise ValueError(f"there are images 0..{IMAGES - 1}, not {i}")
    crop, mirror = i % _CROPS, i // _CROPS
    photo = (data.astronaut, data.coffee, data.chelsea, data.rocket)[crop % 4]()
    step = crop // 4  # 16 crops a photograph, 7 px apart along both sides
    pixels = photo[7 * step : 7 * step + SIDES[0], 9 * step : 9 * step + SIDES[1], :3]
    pixels = np.ascontiguousarray(pixels[:, ::-1] if mirror == 1 else pixels[::-1] if mirror == 2 else pixels)
    buffer = io.BytesIO()
    if i % 2:
        Image.fromarray(pixels).save(buffer, format="PNG")
    else:
        Image.fromarray(pixels).save(buffer, format="JPEG", quality=90)
    return buffer.getvalue()


def head(status: str, headers: dict[str, str], version: str = "HTTP/1.1") -> bytes:
    lines = [f"{version} {status}", *(f"{k}: {v}" for k, v in headers.items())]
    return ("\r\n".join(lines) + "\r\n\r\n").encode("latin-1")


def response(body: bytes, kind: str, length: int | None = None, status: str = "200 OK", **headers: str) -> bytes:
    fields = {"Content-Type": kind, "Content-Length": str(len(body) if length is None else length), **headers}
    return head(status, fields) + body


def kind(i: int) -> str:
    return "image/png" if i % 2 else "image/jpeg"


def chunks(body: bytes, size: int = 1000) -> list[bytes]:
    return [
        b"%x\r\n" % len(part) + part + b"\r\n" for part in (body[at : at + size] for at in range(0, len(body), size))
    ]

"""A local image server on 127.0.0.1 for the url readers: real photographs and every way a url goes wrong.

Paths are /<kind>/<i>; KINDS says what each kind answers and the reason a reader drops it for (None:
the image is kept). The server counts requests, connections and the most requests it held at once,
and stops by itself when the fixture ends: hung responses wait on its stop event, never for ever.
"""

from __future__ import annotations

import io
import select
import struct
import threading
import time
import zlib
from collections import Counter
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer

import numpy as np

HANG_SECONDS = 30.0  # the longest a hung response lasts even if nobody stops the server
MAX_BYTES = 1 << 20  # the body limit the tests give the fetcher; "big" is over it

# kind → the reason a reader drops it for, None where the image is kept.
KINDS: dict[str, str | None] = {
    "photo": None,
    "grey": None,  # greyscale is converted to RGB, not dropped
    "slow": None,
    "busy": None,  # 429 with Retry-After: 1 first, the photo on the retry
    "redirect": None,  # three redirects, then the photo
    "otherbot": None,  # X-Robots-Tag addressed to another crawler
    "hang": "timeout",
    "missing": "http_error",
    "error": "http_error",
    "loop": "redirect_loop",
    "html": "no_image",
    "truncated": "truncated",
    "tiny": "too_small",
    "wide": "bad_aspect",
    "flat": "flat_colour",
    "bomb": "too_many_pixels",
    "noai": "robots_optout",
    "big": "too_large",
    "stream": "too_large",  # over the limit with no Content-Length
    "dds": "undecodable",  # a DDS texture of a pixel format Pillow knows none of (its plugin: NotImplementedError)
    "qoi": "undecodable",  # a QOI header promising more pixels than its data holds (Pillow's decoder: IndexError)
}


def _encode(array: np.ndarray, fmt: str, **options: object) -> bytes:
    from PIL import Image

    buffer = io.BytesIO()
    Image.fromarray(array).save(buffer, format=fmt, **options)
    return buffer.getvalue()


def photographs() -> list[bytes]:
    """Real photographs at web sizes (shorter side 160 to 480 px) as JPEG, PNG and WebP."""
    from PIL import Image
    from skimage import data

    sources = [data.astronaut(), data.coffee(), data.chelsea(), data.rocket()]
    sides = [(320, 240), (480, 480), (240, 160), (360, 480)]
    formats = [("JPEG", {"quality": 90}), ("PNG", {}), ("WEBP", {"quality": 90}), ("JPEG", {"quality": 85})]
    out = []
    for source, side, (fmt, options) in zip(sources, sides, formats, strict=True):
        resized = np.asarray(Image.fromarray(source).convert("RGB").resize(side))
        out.append(_encode(resized, fmt, **options))
    return out


def _bomb() -> bytes:
    """A PNG header declaring 30000 × 30000 pixels with almost no data: only the header may be read."""

    def chunk(kind: bytes, data: bytes) -> bytes:
        return struct.pack(">I", len(data)) + kind + data + struct.pack(">I", zlib.crc32(kind + data))

    header = struct.pack(">IIBBBBB", 30000, 30000, 8, 2, 0, 0, 0)
    data = chunk(b"IDAT", zlib.compress(b"\0" * 64))
    return b"\x89PNG\r\n\x1a\n" + chunk(b"IHDR", header) + data + chunk(b"IEND", b"")


def odd_formats() -> dict[str, bytes]:
    """Files of formats Pillow opens whose plugins fail on damage with exceptions other than OSError."""
    from skimage import data

    photo = np.ascontiguousarray(data.astronaut()[:200, :200])
    dds = bytearray(_encode(photo, "DDS"))
    dds[80:84] = bytes(4)  # the pixel format's flags: none of the formats Pillow reads
    qoi = _encode(photo, "QOI")
    return {"dds": bytes(dds), "qoi": qoi[:4] + struct.pack(">II", 400, 300) + qoi[12 : len(qoi) // 2]}


class ImageServer(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 128  # many fetchers connect at once; socketserver's 5 would stall their connects

    def __init__(self, slow_seconds: float = 0.2) -> None:
        super().__init__(("127.0.0.1", 0), _Handler)
        self.slow_seconds = slow_seconds
        self.stopping = threading.Event()
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.arrivals: dict[str, list[float]] = {}
        self.connections = 0
        self.in_flight = 0
        self.most_in_flight = 0
        self.hanging: dict[int, _Handler] = {}  # requests held open by a hang, by handler
        photos = photographs()
        from skimage import data

        self.photos = photos
        self.bodies = {
            "grey": _encode(data.camera()[:300, :300], "JPEG", quality=90),
            "html": b"<html><body>not found</body></html>",
            "truncated": photos[0][: len(photos[0]) // 2],
            "tiny": _encode(data.astronaut()[::8, ::8], "PNG"),
            "wide": _encode(np.ascontiguousarray(data.astronaut()[:128, :]).repeat(3, axis=1), "JPEG"),
            "flat": _encode(np.full((200, 200, 3), 93, dtype=np.uint8), "PNG"),
            "bomb": _bomb(),
            "big": b"\xff\xd8" + b"\0" * (MAX_BYTES + 10),
            **odd_formats(),
        }

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.server_address[1]}"

    def url(self, kind: str, i: int) -> str:
        return f"{self.base}/{kind}/{i}.jpg"

    def start(self) -> threading.Thread:
        thread = threading.Thread(target=self.serve_forever, kwargs={"poll_interval": 0.05}, daemon=True)
        thread.start()
        return thread

    def handle_error(self, request: object, client_address: object) -> None:
        pass  # a client that gives up mid-answer (a limit, a timeout, a close) is what several tests do

    def stop(self) -> None:
        self.stopping.set()
        self.shutdown()
        self.server_close()


class _Handler(BaseHTTPRequestHandler):
    protocol_version = "HTTP/1.1"  # keep-alive, so connection reuse can be seen
    server: ImageServer

    def log_message(self, format: str, *args: object) -> None:
        pass  # the tests read the counters, not a log

    def setup(self) -> None:
        super().setup()
        with self.server.lock:
            self.server.connections += 1

    def do_GET(self) -> None:
        server = self.server
        self._counted = False
        with server.lock:
            # A client closes a hung request's socket before it starts another, but the hang notices only at
            # its next poll: a request whose client already closed is over, or in_flight would count it.
            for handler in [h for h in server.hanging.values() if select.select([h.connection], [], [], 0)[0]]:
                handler._end_locked()
            server.requests[self.path] += 1
            server.arrivals.setdefault(self.path, []).append(time.monotonic())
            server.in_flight += 1
            server.most_in_flight = max(server.most_in_flight, server.in_flight)
            count = server.requests[self.path]
            self._counted = True
        try:
            self._answer(count)
        finally:
            self._leave()

    def _leave(self) -> None:
        """Ends this request's place in the in-flight count, once: before its body goes out, since a client
        that has the whole body may send its next request before this thread runs again."""
        with self.server.lock:
            self._end_locked()

    def _end_locked(self) -> None:
        if self._counted:
            self._counted = False
            self.server.in_flight -= 1
            self.server.hanging.pop(id(self), None)

    def _answer(self, count: int) -> None:
        server = self.server
        parts = self.path.strip("/").split("/")
        kind, index = parts[0], int(parts[-1].split(".")[0])
        photo = server.photos[index % len(server.photos)]
        if kind == "slow":
            server.stopping.wait(server.slow_seconds)
        if kind in ("photo", "slow") or (kind == "busy" and count > 1) or (kind == "redirect" and len(parts) == 2):
            return self._send(200, photo, "image/jpeg")
        if kind == "busy":
            return self._send(429, b"slow down", "text/plain", {"Retry-After": "1"})
        if kind == "redirect":  # /redirect/<hops>/<i>: count the hops down to /redirect/<i>
            hops = int(parts[1])
            target = f"/redirect/{hops - 1}/{parts[-1]}" if hops > 1 else f"/redirect/{parts[-1]}"
            return self._send(302, b"", "text/plain", {"Location": target})
        if kind == "loop":
            other = f"/loop/b/{parts[-1]}" if len(parts) == 2 else f"/loop/{parts[-1]}"
            return self._send(301, b"", "text/plain", {"Location": f"{server.base}{other}"})
        if kind == "missing":
            return self._send(404, b"no such image", "text/plain")
        if kind == "error":
            return self._send(500, b"broken", "text/plain")
        if kind == "noai":
            return self._send(200, photo, "image/jpeg", {"X-Robots-Tag": "noai"})
        if kind == "otherbot":
            return self._send(200, photo, "image/jpeg", {"X-Robots-Tag": "otherbot: noai, noimageai"})
        if kind == "hang":
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Content-Length", str(len(photo)))
            self.end_headers()
            self.wfile.write(photo[:100])
            self.wfile.flush()
            with server.lock:
                if self._counted:
                    server.hanging[id(self)] = self
            # Hang until the client gives up (its socket turns readable at EOF) or the server stops.
            until = time.monotonic() + HANG_SECONDS
            while not server.stopping.wait(0.05) and time.monotonic() < until:
                if select.select([self.connection], [], [], 0)[0]:
                    break
            self.close_connection = True
            return None
        if kind == "stream":  # no Content-Length: the body ends when the connection closes
            self.send_response(200)
            self.send_header("Content-Type", "image/jpeg")
            self.send_header("Connection", "close")
            self.end_headers()
            for _ in range(MAX_BYTES // 65536 + 2):
                self.wfile.write(b"\0" * 65536)
            self.close_connection = True
            return None
        body = server.bodies[kind]
        return self._send(200, body, "text/html" if kind == "html" else "image/jpeg")

    def _send(self, status: int, body: bytes, kind: str, headers: dict[str, str] | None = None) -> None:
        self.send_response(status)
        self.send_header("Content-Type", kind)
        self.send_header("Content-Length", str(len(body)))
        for name, value in (headers or {}).items():
            self.send_header(name, value)
        self.end_headers()
        self._leave()
        try:
            self.wfile.write(body)
        except (BrokenPipeError, ConnectionResetError):
            self.close_connection = True  # the client gave up on this one (a size limit, a close)

"""A fault-injecting HTTP proxy on 127.0.0.1, in front of the GCS emulator.

Real GCS answers 429 and 503 under load, drops connections and now and then ends a body early; the
emulator never does. The proxy forwards every request to the emulator and, by a schedule the test
programs, answers some of them badly instead. Each request is logged (method and path), so a test can
also count how often a client asked for an object.

Only 127.0.0.1 is involved both ways, and the server stops when the fixture ends or, failing that, when
its lifetime runs out.
"""

from __future__ import annotations

import dataclasses
import http.client
import re
import socket
import struct
import sys
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler, ThreadingHTTPServer
from typing import Literal, Self

Kind = Literal["429", "503", "reset", "slow", "truncate", "corrupt", "shifted"]
_HOP_BY_HOP = {"connection", "keep-alive", "transfer-encoding", "te", "trailer", "upgrade", "proxy-connection"}


class _Server(ThreadingHTTPServer):
    daemon_threads = True
    request_queue_size = 256  # a client opening 128 connections at once is not refused

    def handle_error(self, request: object, client_address: object) -> None:
        # A client that drops its idle keep-alive connection, or gives up on a faulted response, is normal here.
        if not isinstance(sys.exc_info()[1], ConnectionError):
            super().handle_error(request, client_address)


@dataclasses.dataclass
class Fault:
    """`times` requests whose method and path (with query) match get `kind` instead of the real answer.

    429 carries Retry-After: `retry_after`; reset and truncate send `fraction` of the body (a reset ends
    with a TCP RST, a truncation with a clean close while Content-Length promised more); slow sends the
    whole body in `pieces` with `pause` seconds between them; corrupt sends the whole body, framed as
    the real one (its status, its length), with the byte at `fraction` of it flipped; shifted asks the
    emulator for the range `pieces` bytes further on and sends its answer as it is (a 206 of the right
    length, its Content-Range naming the bytes it holds, not the ones asked).
    """

    kind: Kind
    path: str = ""
    method: str = ""
    ranged: bool | None = None  # True: only requests with a Range header; False: only those without
    times: int = 1
    retry_after: str = "1"
    fraction: float = 0.5
    pieces: int = 4
    pause: float = 0.05

    def matches(self, method: str, path: str, ranged: bool = False) -> bool:
        if self.ranged is not None and self.ranged != ranged:
            return False
        return (not self.method or self.method == method) and re.search(self.path, path) is not None


class Link:
    """One link of `bandwidth` bytes/s that every answer's body shares (no cap: None)."""

    def __init__(self, bandwidth: float | None) -> None:
        self.bandwidth = bandwidth
        self._free = 0.0  # when the link has sent every body reserved so far
        self._lock = threading.Lock()

    def pace(self, size: int) -> None:
        """Waits until the link has room for `size` more bytes (no wait without a cap)."""
        if not self.bandwidth:
            return
        with self._lock:
            start = max(time.monotonic(), self._free)
            self._free = start + size / self.bandwidth
            done = self._free
        time.sleep(max(0.0, done - time.monotonic()))


class LocalServer:
    """A threaded HTTP server on 127.0.0.1 at `url`, serving from `start` until `stop` or, failing
    that, until its lifetime runs out."""

    def _serve(self, handler: type[BaseHTTPRequestHandler], lifetime: float) -> None:
        self._server = _Server(("127.0.0.1", 0), handler)
        self._thread = threading.Thread(target=self._server.serve_forever, daemon=True)
        self._lifetime = threading.Timer(lifetime, self.stop)
        self._lifetime.daemon = True

    @property
    def url(self) -> str:
        return f"http://127.0.0.1:{self._server.server_address[1]}"

    def start(self) -> Self:
        self._thread.start()
        self._lifetime.start()
        return self

    def stop(self) -> None:
        self._lifetime.cancel()
        self._server.shutdown()
        self._server.server_close()


class FaultProxy(LocalServer):
    """Forwards to `upstream` (http://host:port) and injects the scheduled faults.

    `latency` seconds are added before each answer, and with `bandwidth` (bytes/s) the bodies of all
    answers together are sent no faster than that: a link to a far bucket, for benchmarks.
    """

    def __init__(
        self, upstream: str, *, lifetime: float = 600.0, latency: float = 0.0, bandwidth: float | None = None
    ) -> None:
        parsed = urllib.parse.urlsplit(upstream)
        self.latency, self.link = latency, Link(bandwidth)
        self._upstream = (parsed.hostname or "127.0.0.1", parsed.port or 80)
        self._lock = threading.Lock()
        self._faults: list[Fault] = []
        self.requests: list[tuple[str, str]] = []
        self.ranged: list[str] = []  # the Range header of each request that had one
        self.injected: list[tuple[str, str, str]] = []
        self._serve(self._handler_class(), lifetime)

    def inject(self, *faults: Fault) -> None:
        with self._lock:
            self._faults.extend(faults)

    def pending(self) -> list[Fault]:
        """Scheduled faults not used up yet: a test that expects all of them hit asserts this is empty."""
        with self._lock:
            return [f for f in self._faults if f.times > 0]

    def count(self, pattern: str, method: str = "") -> int:
        with self._lock:
            return sum(1 for m, p in self.requests if (not method or m == method) and re.search(pattern, p))

    def _take(self, method: str, path: str, ranged: str | None = None) -> Fault | None:
        with self._lock:
            self.requests.append((method, path))
            if ranged is not None:
                self.ranged.append(ranged)
            for fault in self._faults:
                if fault.times > 0 and fault.matches(method, path, ranged is not None):
                    fault.times -= 1
                    self.injected.append((fault.kind, method, path))
                    return fault
        return None

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        proxy = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True  # headers and body go in two writes: no 40 ms wait between them
            timeout = 30  # an idle keep-alive connection ends its thread instead of outliving the test

            def log_message(self, *args: object) -> None:
                pass

            def _forward(self) -> None:
                body = self._request_body()
                fault = proxy._take(self.command, self.path, self.headers.get("Range"))
                if proxy.latency:
                    time.sleep(proxy.latency)
                if fault is not None and fault.kind in ("429", "503"):
                    self._refuse(fault)
                    return
                asked = dict(self.headers.items())
                if fault is not None and fault.kind == "shifted":
                    lo, _, hi = asked["Range"].partition("=")[2].partition("-")
                    asked["Range"] = f"bytes={int(lo) + fault.pieces}-{int(hi) + fault.pieces}"
                    fault = None  # the answer itself goes as the emulator gives it
                status, headers, data = proxy._upstream_call(self.command, self.path, asked, body)
                self.send_response(status)
                for name, value in headers:
                    if name.lower() not in _HOP_BY_HOP and name.lower() != "content-length":
                        self.send_header(name, value)
                self.send_header("Content-Length", str(len(data)))
                self.end_headers()
                if self.command == "HEAD":
                    return
                proxy.link.pace(len(data))
                if fault is None:
                    self.wfile.write(data)
                elif fault.kind == "corrupt":
                    at = min(len(data) - 1, int(len(data) * fault.fraction))
                    self.wfile.write(data[:at] + bytes([data[at] ^ 0xFF]) + data[at + 1 :] if data else data)
                elif fault.kind == "slow":
                    step = max(1, -(-len(data) // fault.pieces))
                    for start in range(0, len(data), step):
                        self.wfile.write(data[start : start + step])
                        self.wfile.flush()
                        time.sleep(fault.pause)
                else:
                    self.wfile.write(data[: int(len(data) * fault.fraction)])
                    self.wfile.flush()
                    if fault.kind == "reset":
                        # Linger 0 turns the close into a RST: the client sees "connection reset by peer".
                        self.connection.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
                    self.close_connection = True

            def _request_body(self) -> bytes:
                if self.headers.get("Transfer-Encoding", "").lower() == "chunked":
                    parts = []
                    while size := int(self.rfile.readline().split(b";")[0].strip() or b"0", 16):
                        parts.append(self.rfile.read(size))
                        self.rfile.readline()
                    while self.rfile.readline() not in (b"\r\n", b"\n", b""):  # trailers
                        pass
                    return b"".join(parts)
                return self.rfile.read(int(self.headers.get("Content-Length") or 0))

            def _refuse(self, fault: Fault) -> None:
                status = int(fault.kind)
                payload = f'{{"error": {{"code": {status}, "message": "injected by the test proxy"}}}}'.encode()
                self.send_response(status)
                if status == 429:
                    self.send_header("Retry-After", fault.retry_after)
                self.send_header("Content-Type", "application/json")
                self.send_header("Content-Length", str(len(payload)))
                self.end_headers()
                self.wfile.write(payload)

            do_GET = do_POST = do_PUT = do_DELETE = do_PATCH = do_HEAD = _forward

        return Handler

    def _upstream_call(
        self, method: str, path: str, headers: dict[str, str], body: bytes
    ) -> tuple[int, list[tuple[str, str]], bytes]:
        connection = http.client.HTTPConnection(*self._upstream, timeout=30)
        try:
            forwarded = {k: v for k, v in headers.items() if k.lower() not in _HOP_BY_HOP}
            forwarded["Content-Length"] = str(len(body))
            connection.request(method, path, body=body, headers=forwarded)
            response = connection.getresponse()
            return response.status, response.getheaders(), response.read()
        finally:
            connection.close()

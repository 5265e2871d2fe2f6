"""Servers on 127.0.0.1 for the lean range client's tests (dew.data.http_ranges): a range server of a
few lines of sockets, over plain TCP or TLS, that answers whatever its test's `answer` says (framing it
breaks, a 401), and a proxy that answers CONNECT and relays bytes. Both keep a record of what they were
asked, listen on 127.0.0.1 only, and stop by themselves after LIFETIME seconds if no one stops them.
"""

from __future__ import annotations

import contextlib
import socket
import ssl
import threading
import time
from collections.abc import Callable, Iterable

LIFETIME = 120.0  # a server stops after this long whoever forgets it
_TICK = 0.2
DATA = bytes(range(256)) * 64  # the object every range is read from

# (request headers, lowercased; lo; hi) -> the writes that answer it, each its own sendall (a generator
# may pause between them)
Answer = Callable[[dict[str, str], int, int], Iterable[bytes]]


def partial(lo: int, hi: int, body: bytes | None = None, length: int | None = None) -> bytes:
    """A 206 answer to bytes [lo, hi) of DATA: its own body and length unless `body`/`length` say otherwise."""
    body = DATA[lo:hi] if body is None else body
    head = (
        f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(body) if length is None else length}\r\n"
        f"Content-Range: bytes {lo}-{hi - 1}/{len(DATA)}\r\n\r\n"
    )
    return head.encode() + body


def honest(head: dict[str, str], lo: int, hi: int) -> list[bytes]:
    return [partial(lo, hi)]


class _Listener:
    """Accepts on 127.0.0.1 until stopped or LIFETIME is over, handing each connection to `_serve`."""

    def __init__(self) -> None:
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(_TICK)
        self.port = self._listener.getsockname()[1]
        self._stop = threading.Event()
        self._deadline = time.monotonic() + LIFETIME
        self._open: list[socket.socket] = []
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with self._listener:
            while not self._stop.is_set() and time.monotonic() < self._deadline:
                try:
                    connection, _ = self._listener.accept()
                except TimeoutError:
                    continue
                except OSError:
                    return
                connection.settimeout(10)
                self._open.append(connection)
                threading.Thread(target=self._guarded, args=(connection,), daemon=True).start()
        self.stop()

    def _guarded(self, connection: socket.socket) -> None:
        with contextlib.suppress(OSError), connection:
            self._serve(connection)

    def _serve(self, connection: socket.socket) -> None:
        raise NotImplementedError

    def stop(self) -> None:
        self._stop.set()
        for connection in list(self._open):
            with contextlib.suppress(OSError):
                connection.shutdown(socket.SHUT_RDWR)
            with contextlib.suppress(OSError):
                connection.close()


def _head(connection: socket.socket, data: bytes) -> tuple[bytes, bytes] | None:
    """(one request's head, the bytes after it) read from `connection` after `data`; None at its close."""
    while b"\r\n\r\n" not in data:
        chunk = connection.recv(4096)
        if not chunk:
            return None
        data += chunk
    head, _, rest = data.partition(b"\r\n\r\n")
    return head, rest


class RangeServer(_Listener):
    """Answers range GETs with `answer`, keeping connections alive, over TLS where `context` is given.
    `requests` holds each request's headers (lowercased, "request-line" its first line); `connections`
    counts the connections that asked something (reach's probe, which asks nothing, is not one);
    `written` is set once the writes of an answer have all been sent."""

    def __init__(self, answer: Answer = honest, context: ssl.SSLContext | None = None) -> None:
        self.answer, self.context = answer, context
        self.requests: list[dict[str, str]] = []
        self.connections = 0
        self.written = threading.Event()
        super().__init__()
        self.url = f"{'https' if context else 'http'}://127.0.0.1:{self.port}"

    def _serve(self, connection: socket.socket) -> None:
        if self.context is not None:
            try:
                connection = self.context.wrap_socket(connection, server_side=True)
            except OSError:  # the client refused the certificate, or was reach's probe
                return
            self._open.append(connection)
        data, asked = b"", False
        while (read := _head(connection, data)) is not None:
            head, data = read
            lines = head.decode("latin-1").split("\r\n")
            headers = {"request-line": lines[0]}
            headers.update((k.strip().lower(), v.strip()) for k, _, v in (line.partition(":") for line in lines[1:]))
            self.requests.append(headers)
            if not asked:
                asked = True
                self.connections += 1
            asked_range = headers.get("range", "bytes=0--1")  # a request for no range (a listing) is lo = hi = 0
            lo, hi = (int(x) for x in asked_range.partition("=")[2].split("-", 1))
            for write in self.answer(headers, lo, hi + 1):
                connection.sendall(write)
            self.written.set()


class ConnectProxy(_Listener):
    """An HTTP proxy that answers CONNECT only and relays the tunnel's bytes both ways; `connects` holds
    each request's head, as lines. With `refuse` (a status and its reason, "407 Proxy Authentication
    Required"), it answers the first `times` CONNECTs (every one when None) with that instead."""

    def __init__(self, refuse: str | None = None, times: int | None = None) -> None:
        self.connects: list[list[str]] = []
        self.refuse, self.times = refuse, times
        super().__init__()
        self.url = f"http://127.0.0.1:{self.port}"

    def _serve(self, connection: socket.socket) -> None:
        read = _head(connection, b"")
        if read is None:
            return
        head, early = read
        lines = head.decode("latin-1").split("\r\n")
        self.connects.append(lines)
        method, where, _ = lines[0].split(" ", 2)
        if method != "CONNECT":
            connection.sendall(b"HTTP/1.1 405 Method Not Allowed\r\nContent-Length: 0\r\n\r\n")
            return
        if self.refuse is not None and (self.times is None or len(self.connects) <= self.times):
            asks = 'Proxy-Authenticate: Basic realm="dew"\r\n' if self.refuse.startswith("407") else ""
            connection.sendall(f"HTTP/1.1 {self.refuse}\r\n{asks}Content-Length: 0\r\n\r\n".encode())
            return
        host, _, port = where.rpartition(":")
        with socket.create_connection((host, int(port)), timeout=10) as upstream:
            self._open.append(upstream)
            connection.sendall(b"HTTP/1.1 200 Connection established\r\n\r\n")
            upstream.sendall(early)
            back = threading.Thread(target=_relay, args=(upstream, connection), daemon=True)
            back.start()
            _relay(connection, upstream)
            back.join(10)


def _relay(source: socket.socket, sink: socket.socket) -> None:
    with contextlib.suppress(OSError):
        while chunk := source.recv(1 << 16):
            sink.sendall(chunk)
    with contextlib.suppress(OSError):
        sink.shutdown(socket.SHUT_WR)

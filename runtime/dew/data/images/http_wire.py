"""HTTP/1.1 on one socket: every step under one deadline, a connection kept only when its framing was exact.

The fetcher's wire layer, written against the RFC 9112 rules a careful client follows rather than on
http.client, whose reads wait `timeout` per received byte (a server dripping a header line never runs out
of it), which rejects no url it is handed and which hands a connection back however its last body ended:

- Every wait (name lookup, connect, TLS handshake, send, each receive) takes the seconds `left()` says
  remain of one deadline, so however a server paces its bytes, the exchange ends when the deadline does.
- A body is framed by one Content-Length (every copy of the header agreeing), by chunked coding, or by the
  connection's end; anything else is Broken: a length that is not one plain number, a Transfer-Encoding other
  than `chunked` (even an empty one), an interim 1xx that frames a body. A Content-Length body that ends short
  is Broken. An HTTP/1.0 answer in chunks, or one beside a Content-Length, is read and never kept.
- `decoded` undoes a gzip or deflate Content-Encoding within the caller's limit; another coding is Unsupported.
- A connection is reusable only after an exchange whose framing was exact, nothing having arrived past its
  end (bytes a server sends beyond its Content-Length would be read as the next url's answer), and again
  only if nothing arrives while it waits idle (`Connection.clean`). Bytes waiting on a fresh connection
  before the request is sent answer nothing of ours: Broken.
- A body without a length ends at the server's close only: a reset, or a TLS stream cut without its
  close_notify (how a truncation attack looks), is Broken.
- Limits: a response head of HEAD_LIMIT bytes and MAX_HEADERS lines, chunk-size lines of LINE_LIMIT.
"""

from __future__ import annotations

import contextlib
import dataclasses
import errno
import ipaddress
import select
import socket
import ssl
import threading
import time
import zlib
from collections.abc import Callable, Sequence
from typing import Any

from dew.data.images.urls import Target

HEAD_LIMIT = 64 << 10
MAX_HEADERS = 128
LINE_LIMIT = 4096
_RECV = 1 << 16
_TICK = 0.25  # the longest a connect, handshake or lookup waits between looks at left()
_RESOLVED_SECONDS = 300.0  # how long a name lookup is reused for
_FRAMING = frozenset({"content-length", "transfer-encoding"})
_TOKEN = frozenset(b"!#$%&'*+-.^_`|~0123456789abcdefghijklmnopqrstuvwxyzABCDEFGHIJKLMNOPQRSTUVWXYZ")

# Seconds left of the deadline; it raises (the caller's timeout or close) when none are.
Left = Callable[[], float]


class Broken(Exception):
    """The exchange broke: an answer malformed or cut short, or the connection refused or reset."""


class _Closed(Broken):
    """The server closed the connection (an orderly end: a TCP FIN, or TLS close_notify)."""


class Stale(Broken):
    """A reused connection ended before a byte of the answer: the server had closed it while it was idle."""


class Oversize(Exception):
    """The body is over the caller's limit, by its Content-Length or as it arrived."""


@dataclasses.dataclass(frozen=True)
class Response:
    """A response head: status, headers with lower-case names, and how its body is framed."""

    status: int
    reason: str
    headers: tuple[tuple[str, str], ...]
    framing: str  # "length", "chunked", "close" (until the connection ends) or "none"
    length: int
    persistent: bool  # the server means to keep the connection open

    def header(self, name: str) -> str | None:
        return next((value for key, value in self.headers if key == name), None)

    def all(self, name: str) -> list[str]:
        return [value for key, value in self.headers if key == name]


class Connection:
    """A socket and the bytes received on it that no exchange has consumed yet."""

    def __init__(self, sock: socket.socket) -> None:
        self.sock = sock
        self.buffer = bytearray()
        self.exchanges = 0  # finished exchanges; a stale connection is told from a broken server by it
        self._received = 0

    def clean(self) -> bool:
        """Whether nothing has arrived since the last exchange ended: a byte, or the server's close."""
        if self.buffer or (isinstance(self.sock, ssl.SSLSocket) and self.sock.pending()):
            return False
        return self.sock.fileno() >= 0 and not _ready(self.sock, select.POLLIN, 0.0)

    def close(self) -> None:
        with contextlib.suppress(OSError):
            self.sock.close()

    def exchange(self, target: Target, headers: Sequence[tuple[str, str]], left: Left) -> Response:
        """Sends a GET for `target` and reads the response head."""
        lines = [f"GET {target.path} HTTP/1.1", f"Host: {target.authority}", *(f"{k}: {v}" for k, v in headers)]
        self._received = 0
        # A server speaks only when asked: bytes already here on a fresh plain connection answer no request of
        # ours (a kept one was looked at as it left the idle list; a fresh TLS one may hold session tickets).
        if not self.exchanges and not isinstance(self.sock, ssl.SSLSocket) and not self.clean():
            raise Broken("the server sent an answer before it was asked")
        try:
            self.sock.settimeout(left())
            self.sock.sendall(("\r\n".join(lines) + "\r\n\r\n").encode("ascii"))
            return self._head(left)
        except (ConnectionResetError, BrokenPipeError, Broken) as error:
            if self.exchanges and not self._received:
                raise Stale(f"the kept connection was closed by the server ({error})") from None
            if isinstance(error, Broken):
                raise
            raise Broken(f"the connection broke: {error}") from None

    def body(self, response: Response, left: Left, limit: int) -> bytes:
        """The body, read to the end of its framing; Oversize past `limit` bytes."""
        if response.framing == "none":
            return b""
        if response.framing == "length":
            if response.length > limit:
                raise Oversize(f"Content-Length {response.length} is over {limit} bytes")
            while len(self.buffer) < response.length:
                self._fill(left, f"the body ended {response.length - len(self.buffer)} bytes short of its length")
            return self._take(response.length)
        if response.framing == "chunked":
            return self._chunked(left, limit)
        while len(self.buffer) <= limit:  # until the server closes: a close, not a reset or a TLS cut (Broken)
            try:
                self._fill(left, "")
            except _Closed:
                return self._take(len(self.buffer))
        raise Oversize(f"the body runs past {limit} bytes")

    def drained(self, response: Response) -> bool:
        """Consumes a body that has already arrived whole (an error page, a redirect's); whether it had."""
        if response.framing == "none":
            return True
        if response.framing == "length" and len(self.buffer) >= response.length:
            self._take(response.length)
            return True
        return False

    def finished(self, response: Response) -> bool:
        """Whether this exchange leaves the connection fit for the next: kept open, framed exactly, nothing over."""
        self.exchanges += 1
        return response.persistent and response.framing in ("length", "chunked", "none") and self.clean()

    def _head(self, left: Left) -> Response:
        used = 0
        while True:
            line = self._line(left, HEAD_LIMIT - used)
            used += len(line) + 2
            parts = line.split(None, 2)
            if len(parts) < 2 or parts[0] not in (b"HTTP/1.1", b"HTTP/1.0") or not _status(parts[1]):
                raise Broken(f"the status line {bytes(line[:60])!r} is no HTTP/1.x status")
            status = int(parts[1])
            headers: list[tuple[str, str]] = []
            while line := self._line(left, HEAD_LIMIT - used):
                used += len(line) + 2
                if len(headers) >= MAX_HEADERS:
                    raise Broken(f"the head has more than {MAX_HEADERS} header lines")
                if line[:1] in (b" ", b"\t") and headers:  # an obsolete folded line continues the one before
                    headers[-1] = (headers[-1][0], f"{headers[-1][1]} {line.strip().decode('latin-1')}")
                    continue
                name, colon, value = line.partition(b":")
                if not colon or not name or not set(name) <= _TOKEN:
                    raise Broken(f"the header line {bytes(line[:60])!r} is malformed")
                headers.append((name.decode("ascii").lower(), value.strip().decode("latin-1")))
            if 100 <= status < 200 and status != 101:
                # An interim answer (100 Continue, 103 Early Hints): the real one follows. None has a body, so one
                # that frames a body is no answer a reading could be sure of.
                if any(key in _FRAMING for key, _ in headers):
                    raise Broken(f"the interim {status} response frames a body, which none has")
                continue
            reason = parts[2].decode("latin-1") if len(parts) > 2 else ""
            return _framed(status, reason, parts[0] == b"HTTP/1.1", tuple(headers))

    def _chunked(self, left: Left, limit: int) -> bytes:
        body = bytearray()
        while True:
            line = self._line(left, LINE_LIMIT)
            size = line.split(b";", 1)[0].strip()  # an extension after ";" is read and ignored
            if not size or len(size.lstrip(b"0")) > 16 or not all(c in b"0123456789abcdefABCDEF" for c in size):
                raise Broken(f"the chunk-size line {bytes(line[:40])!r} is malformed")
            length = int(size, 16)
            if not length:
                break
            if len(body) + length > limit:
                raise Oversize(f"the chunked body runs past {limit} bytes")
            while len(self.buffer) < length + 2:
                self._fill(left, "the chunked body ended inside a chunk")
            if self.buffer[length : length + 2] != b"\r\n":
                raise Broken("a chunk does not end where its size line says")
            body += self.buffer[:length]
            del self.buffer[: length + 2]
        used = 0
        while line := self._line(left, HEAD_LIMIT - used):  # trailer fields, read and ignored
            used += len(line) + 2
        return bytes(body)

    def _line(self, left: Left, limit: int) -> bytearray:
        """The next line without its CRLF (or LF)."""
        start = 0
        while (end := self.buffer.find(b"\n", start)) < 0:
            if len(self.buffer) > limit:
                raise Broken(f"a line of the answer runs past {max(limit, 0)} bytes")
            start = len(self.buffer)
            self._fill(left, "the connection closed inside the response head")
        if end > limit:
            raise Broken(f"a line of the answer runs past {max(limit, 0)} bytes")
        line = self.buffer[:end]
        del self.buffer[: end + 1]
        return line[:-1] if line.endswith(b"\r") else line

    def _fill(self, left: Left, ended: str) -> None:
        self.sock.settimeout(left())
        try:
            data = self.sock.recv(_RECV)
        except ssl.SSLEOFError:  # the TCP connection ended with no TLS close_notify: whoever cut it, not the server
            raise Broken("the TLS connection ended without its close_notify") from None
        if not data:
            raise _Closed(ended or "the connection closed")
        self._received += len(data)
        self.buffer += data

    def _take(self, count: int) -> bytes:
        taken = bytes(self.buffer[:count])
        del self.buffer[:count]
        return taken


class Unsupported(Exception):
    """The body is in a content coding the fetcher cannot undo (br, zstd, compress, ...)."""


def decoded(response: Response, body: bytes, limit: int) -> bytes:
    """The body with its Content-Encoding undone (gzip, deflate; identity is none), as a browser undoes it: what
    the server sent compressed is never taken for the image. Unsupported for another coding, Broken when the
    compressed stream is malformed, cut short or followed by bytes, Oversize past `limit` decoded bytes."""
    if not body:  # nothing was sent, in any coding: an empty answer, as a browser reads it
        return body
    codings = [t.strip().lower() for value in response.all("content-encoding") for t in value.split(",")]
    for coding in reversed([c for c in codings if c and c != "identity"]):
        if coding in ("gzip", "x-gzip"):
            body = _inflate(body, 16 + zlib.MAX_WBITS, coding, limit)
        elif coding == "deflate":  # zlib-wrapped as the RFC says, or raw deflate as some servers send it
            try:
                body = _inflate(body, zlib.MAX_WBITS, coding, limit)
            except Broken:
                body = _inflate(body, -zlib.MAX_WBITS, coding, limit)
        else:
            raise Unsupported(f"the content coding {coding[:40]!r} is not supported")
    return body


def _inflate(data: bytes, wbits: int, coding: str, limit: int) -> bytes:
    inflater = zlib.decompressobj(wbits)
    try:
        out = inflater.decompress(data, limit + 1)
    except zlib.error as error:
        raise Broken(f"the {coding} body does not decompress: {error}") from None
    if len(out) > limit:
        raise Oversize(f"the {coding} body decompresses past {limit} bytes")
    if not inflater.eof or inflater.unused_data:
        raise Broken(f"the {coding} body {'has bytes past its end' if inflater.eof else 'ends inside its stream'}")
    return out


def _status(text: bytes | bytearray) -> bool:
    return len(text) == 3 and text.isdigit()


def _framed(status: int, reason: str, http11: bool, headers: tuple[tuple[str, str], ...]) -> Response:
    """The Response, its framing decided as RFC 9112 section 6.3 says a client must."""

    def tokens(name: str) -> list[str]:
        return [t.strip().lower() for key, value in headers if key == name for t in value.split(",") if t.strip()]

    connection = tokens("connection")
    persistent = "close" not in connection and (http11 or "keep-alive" in connection)
    names = {key for key, _ in headers}
    if status in (204, 304):
        return Response(status, reason, headers, "none", 0, persistent and not names & _FRAMING)
    if "transfer-encoding" in names:  # present, even empty, it overrides any Content-Length (section 6.3)
        codings = tokens("transfer-encoding")
        if codings != ["chunked"]:
            raise Broken(f"the transfer coding {', '.join(codings) or '(empty)'!r} is not supported")
        # A Content-Length beside chunked coding is how requests are smuggled, and HTTP/1.0 has no transfer
        # codings (section 6.1 says such framing is faulty): read chunked, then close.
        return Response(status, reason, headers, "chunked", 0, persistent and http11 and "content-length" not in names)
    if "content-length" in names:
        values = {t.strip() for key, value in headers if key == "content-length" for t in value.split(",")}
        value = next(iter(values))
        if len(values) > 1 or not value.isascii() or not value.isdigit():
            raise Broken(f"the Content-Length {', '.join(sorted(values))!r} is not one number")
        # Past 18 digits a length is over any limit (and int() refuses a string of thousands of digits).
        length = int(value) if len(value.lstrip("0")) <= 18 else 1 << 62
        return Response(status, reason, headers, "length", length, persistent)
    return Response(status, reason, headers, "close", 0, False)


def _ready(sock: socket.socket, events: int, seconds: float) -> bool:
    """Whether `sock` is ready for `events` within `seconds`; poll, since select cannot see a descriptor over 1023."""
    poller = select.poll()
    poller.register(sock, events)
    return bool(poller.poll(max(0, int(seconds * 1000))))


class Resolver:
    """Name lookups under a deadline, each host's kept for a while: getaddrinfo cannot be interrupted, so it runs
    in a daemon thread of its own that the waiting fetch may leave behind."""

    def __init__(self) -> None:
        self._lock = threading.Lock()
        self._known: dict[tuple[str, int], tuple[float, list[tuple[int, tuple]]]] = {}

    def addresses(self, host: str, port: int, left: Left) -> list[tuple[int, tuple]]:
        """(family, address) pairs for host:port, or Broken when the name has none."""
        try:
            literal = ipaddress.ip_address(host)
        except ValueError:
            pass
        else:
            family = socket.AF_INET6 if literal.version == 6 else socket.AF_INET
            return [(family, (host, port, 0, 0) if literal.version == 6 else (host, port))]
        with self._lock:
            known = self._known.get((host, port))
        if known is not None and known[0] > time.monotonic():
            return known[1]
        done = threading.Event()
        found: list[list[tuple[Any, ...]] | BaseException] = []

        def lookup() -> None:
            try:
                found.append(socket.getaddrinfo(host, port, type=socket.SOCK_STREAM))
            except (OSError, UnicodeError) as error:
                found.append(error)
            done.set()

        threading.Thread(target=lookup, name="dew-resolve", daemon=True).start()
        while not done.wait(min(_TICK, left())):
            continue
        if isinstance(found[0], BaseException):
            raise Broken(f"no address for {host}: {found[0]}")
        addresses = [(family, address) for family, _, _, _, address in found[0]]
        with self._lock:
            self._known[(host, port)] = (time.monotonic() + _RESOLVED_SECONDS, addresses)
        return addresses


def connect(target: Target, addresses: list[tuple[int, tuple]], left: Left, tls: ssl.SSLContext | None) -> Connection:
    """A connection to the first address that answers, TLS-wrapped for https, within the deadline."""
    error: Exception = Broken(f"{target.host} has no address")
    for family, address in addresses:
        sock = socket.socket(family, socket.SOCK_STREAM)
        try:
            sock.setblocking(False)
            code = sock.connect_ex(address)
            while code in (errno.EINPROGRESS, errno.EAGAIN):
                if _ready(sock, select.POLLOUT, min(_TICK, left())):
                    code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
            if code:
                raise Broken(f"connect to {target.authority}: {errno.errorcode.get(code, code)}")
            if tls is not None:
                # A TLS stream cut without close_notify may be an attacker's truncation: an SSLEOFError, never an end.
                wrapped = tls.wrap_socket(
                    sock, server_hostname=target.host, do_handshake_on_connect=False, suppress_ragged_eofs=False
                )
                sock = _handshake(wrapped, left)
            return Connection(sock)
        except (Broken, OSError) as failed:
            sock.close()
            error = failed if isinstance(failed, Broken) else Broken(f"connect to {target.authority}: {failed}")
        except BaseException:
            sock.close()
            raise
    raise error


def _handshake(sock: ssl.SSLSocket, left: Left) -> ssl.SSLSocket:
    while True:
        try:
            sock.do_handshake()
            return sock
        except ssl.SSLWantReadError:
            _ready(sock, select.POLLIN, min(_TICK, left()))
        except ssl.SSLWantWriteError:
            _ready(sock, select.POLLOUT, min(_TICK, left()))
        except ssl.SSLError as error:
            raise Broken(f"TLS handshake with {sock.server_hostname}: {error.reason or error}") from None

"""One HTTP Range GET of a gs:// object, on pooled HTTP/1.1 connections of this process, without requests.

requests and urllib3 spent about 450 µs of client CPU on each small range request (merging settings,
preparing and re-parsing the URL, header dicts, email-parser headers): most of a process's budget when
a batch of token windows is hundreds of 4 KiB requests. Here a request is one prebuilt line of bytes
sent on a kept-alive socket and an answer parsed for the few headers that matter, about a fifth of
that. It keeps every guarantee of the requests path it replaces (dew.data.remote._get):
- framing is exact: a 206 must say Content-Length equal to the range asked and Content-Range naming
  that same range, and no byte may follow its body. Anything else is a transient failure and the
  connection is closed, never pooled: bytes left unread on a reused connection would be read as the
  next request's answer. A pooled connection is also checked for pending bytes (or the server's
  close) before it is used again, and dropped if it has any;
- every other answer (404, 429, 5xx, a 200 that ignored the range) closes its connection;
- timeouts: 10 s to connect, then 60 s at most between bytes: a stalled connection becomes a retry,
  a slow one that keeps sending is left to finish (remote._TIMEOUTS), within what is left of the
  read's retry budget (retries.time_left): a server dripping a byte now and then fails the read in time;
- the proxy (NO_PROXY honoured) and CA bundle (REQUESTS_CA_BUNDLE, CURL_CA_BUNDLE, else certifi's,
  as requests) are read from the environment once, when the client is made; https through a proxy
  goes by CONNECT;
- credentials (real GCS only) are the session's own: refreshed when expired, and once on a 401; a
  refresh that fails, and a proxy that refuses the CONNECT (407, 403), are one clear error at once
  (dew.data.storage_errors), not retries;
- one client per requests session of remote._session, so per process (fork) and endpoint; it pools
  at most max(64, DEW_GCS_REQUESTS) idle connections.
Retries, backoff and Retry-After stay with the caller (remote._retrying): this raises retries.Transient.
"""

from __future__ import annotations

import base64
import contextlib
import functools
import http.client
import os
import select
import socket
import ssl
import threading
import time
import urllib.parse
import urllib.request
from typing import Any

from dew.data import readahead, remote, retries, storage_errors

_HEAD_LIMIT = 64 << 10
_ERROR_TEXT = 200
_BUNDLE_VARIABLES = "REQUESTS_CA_BUNDLE, else CURL_CA_BUNDLE, else certifi's"


class _Framing(Exception):
    """An answer whose bytes do not frame the range asked: its connection is not reused."""


class Client:
    """Range GETs against `endpoint` (scheme://host[:port][/base]) with `credentials` (None: unauthorised)."""

    def __init__(self, endpoint: str, credentials: Any = None) -> None:
        parts = urllib.parse.urlsplit(endpoint)
        self.https = parts.scheme == "https"
        self.host = parts.hostname or ""
        self.port = parts.port or (443 if self.https else 80)
        self.base = parts.path.rstrip("/")
        default = 443 if self.https else 80
        self.host_header = self.host if self.port == default else f"{self.host}:{self.port}"
        self.credentials = credentials
        self.size = max(64, remote.requests_in_flight())
        self._idle: list[socket.socket] = []
        self._lock = threading.Lock()
        self._auth: tuple[str | None, str] = (None, "")  # (token, its header lines)
        self._proxy = _proxy_for(parts.scheme, self.host)
        self._context: ssl.SSLContext | None = None
        self._bundle = ""
        if self.https:
            self._context = self._verifying()
        # A plain http endpoint through a proxy is asked by absolute URI; https tunnels by CONNECT.
        self._prefix = self._proxy_lines = ""
        if self._proxy is not None and not self.https:
            self._prefix = f"http://{self.host_header}"
            self._proxy_lines = "".join(f"{k}: {v}\r\n" for k, v in self._proxy[2].items())

    def _verifying(self) -> ssl.SSLContext:
        self._bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE") or ""
        if not self._bundle:
            import certifi

            self._bundle = certifi.where()
        try:
            context = ssl.create_default_context(cafile=self._bundle)
        except (OSError, ssl.SSLError) as error:  # Python's own message names no file
            raise type(error)(f"the CA bundle {self._bundle} ({_BUNDLE_VARIABLES}) is unreadable: {error}") from None
        context.set_alpn_protocols(["http/1.1"])
        return context

    def get(self, uri: str, target: str, lo: int, hi: int) -> memoryview:
        """Bytes [lo, hi) of the object at `target` (path and query below the endpoint), exactly.
        Raises retries.Transient for what another attempt may not meet, FileNotFoundError for a 404."""
        refreshed = False
        while True:
            sent, lines = self._authorization(uri)
            status, head, extra = self._exchange(uri, target, lo, hi, lines)
            if status != 401 or self.credentials is None or refreshed:
                break
            self._refresh(uri, sent)
            refreshed = True  # as google.auth's AuthorizedSession: a 401 refreshes the token once
        if status == 206:
            assert isinstance(extra, memoryview)
            return extra
        if status == 404:
            raise FileNotFoundError(uri)
        if status == 200:  # another attempt would be answered the same way
            raise OSError(f"{uri}: asked for bytes {lo}-{hi - 1}, the server answered the whole object (HTTP 200)")
        if status in remote._RETRIED_STATUS:
            raise retries.Transient(f"HTTP {status}", retry_after=retries.retry_after(head.get("retry-after")))
        text = bytes(extra).decode("utf-8", "replace")
        raise OSError(f"{uri}: HTTP {status} {text[:_ERROR_TEXT]}")

    def _exchange(
        self, uri: str, target: str, lo: int, hi: int, authorization: str
    ) -> tuple[int, dict[str, str], memoryview | bytes]:
        """(status, headers, body): a 206's body is the range, checked; another answer's is what came
        with its headers (its connection closed). Network failures and bad framing are _Transient; a
        certificate that does not verify is not: no later attempt verifies it either."""
        request = (
            f"GET {self._prefix}{self.base}{target} HTTP/1.1\r\nHost: {self.host_header}\r\n"
            f"Range: bytes={lo}-{hi - 1}\r\nAccept-Encoding: identity\r\nUser-Agent: dew\r\n"
            f"{self._proxy_lines}{authorization}\r\n"
        ).encode("latin-1")
        sock = self._checkout()
        try:
            if sock is None:
                sock = self._connect(uri)
            status, head, body = _abortable_answer(sock, request, lo, hi)
        except readahead.Cancelled:
            _close(sock)
            raise
        except _Framing as error:
            _close(sock)
            raise retries.Transient(str(error)) from None
        except storage_errors.ProxyRefused:
            _close(sock)
            raise
        except ssl.SSLCertVerificationError as error:
            _close(sock)
            raise OSError(
                f"{uri}: the TLS certificate of {self.host}:{self.port} does not verify against the CA bundle "
                f"{self._bundle} ({_BUNDLE_VARIABLES}): {error.verify_message}"
            ) from error
        except (OSError, http.client.HTTPException) as error:  # reset, timeout, refused, TLS
            _close(sock)
            raise retries.Transient(f"{type(error).__name__}: {error}") from error
        if status != 206 or head.get("connection", "").lower() == "close":
            _close(sock)
        else:
            if sock.gettimeout() != remote._TIMEOUTS[1]:  # shortened by the read's budget (_receiving)
                sock.settimeout(remote._TIMEOUTS[1])
            self._checkin(sock)
        return status, head, body

    def _checkout(self) -> socket.socket | None:
        while True:
            with self._lock:
                if not self._idle:
                    return None
                sock = self._idle.pop()
            if not _pending(sock):
                return sock
            _close(sock)  # the server closed it, or sent bytes no request asked for

    def _checkin(self, sock: socket.socket) -> None:
        with self._lock:
            if len(self._idle) < self.size:
                self._idle.append(sock)
                return
        _close(sock)

    def _connect(self, uri: str) -> socket.socket:
        timeout = remote._TIMEOUTS[0]
        if self._proxy is None:
            host, port = self.host, self.port
        else:
            host, port = self._proxy[0], self._proxy[1]
        if self.https:
            connection: http.client.HTTPConnection = http.client.HTTPSConnection(
                host, port, timeout=timeout, context=self._context
            )
            if self._proxy is not None:
                connection.set_tunnel(self.host, self.port, headers=self._proxy[2])
        else:
            connection = http.client.HTTPConnection(host, port, timeout=timeout)
        try:
            connection.connect()  # the TCP connect, CONNECT through a proxy, the TLS handshake
        except OSError as error:
            if self._proxy is not None and self.https:  # a refusal no retry changes is said at once
                origin, sent = f"{self.host}:{self.port}", "Proxy-Authorization" in self._proxy[2]
                where = f"{self._proxy[0]}:{self._proxy[1]}"
                refused = storage_errors.refused_tunnel(uri, error, where, origin, sent_credentials=sent)
                if refused is not None:
                    raise refused from error
            raise
        sock = connection.sock
        sock.setsockopt(socket.IPPROTO_TCP, socket.TCP_NODELAY, 1)
        sock.settimeout(remote._TIMEOUTS[1])
        return sock

    def _authorization(self, uri: str) -> tuple[str | None, str]:
        """(the token, the header lines that send it) for the next request; refreshed first if expired
        (a refresh that fails is storage_errors.CredentialsFailed, at once)."""
        credentials = self.credentials
        if credentials is None:
            return None, ""
        auth = self._auth
        if auth[0] is not None and auth[0] == credentials.token and credentials.valid:
            return auth
        with self._lock:
            if not credentials.valid:
                storage_errors.refresh(uri, credentials, _token_request())
            return self._render()

    def _refresh(self, uri: str, refused: str | None) -> None:
        """A new token after the server refused `refused`, unless another thread already got one: the
        requests in flight that met the same 401 share one refresh, not one call to the token endpoint each."""
        with self._lock:
            if self.credentials.token == refused:
                storage_errors.refresh(uri, self.credentials, _token_request())
            self._render()

    def _render(self) -> tuple[str | None, str]:
        headers: dict[str, str] = {}
        self.credentials.apply(headers)  # Authorization, and x-goog-user-project where one is set
        self._auth = (self.credentials.token, "".join(f"{k}: {v}\r\n" for k, v in headers.items()))
        return self._auth


def _abortable_answer(sock: socket.socket, request: bytes, lo: int, hi: int) -> tuple[int, dict[str, str], Any]:
    """`request` sent on `sock` and its answer read within the read's retry budget. A close of the stream
    this read is for shuts the socket down, so a server that stopped answering holds no close: the
    failure that follows is Cancelled, not retried."""
    try:
        with readahead.abortable(sock):
            sock.sendall(request)
            left = retries.time_left()
            return _answer(sock, lo, hi, None if left is None else time.monotonic() + left)
    except (OSError, http.client.HTTPException, _Framing) as error:
        if readahead.cancelled():
            raise readahead.Cancelled("the data iterator that asked for this read was closed") from error
        raise


def _receiving(sock: socket.socket, deadline: float | None, lo: int, hi: int, got: int) -> None:
    """Before a recv: its wait cut to what is left before `deadline` (the read's retry budget), and a
    TimeoutError once none is, however recently the last byte came."""
    if deadline is None:
        return
    left = deadline - time.monotonic()
    if left <= 0:
        raise TimeoutError(
            f"range {lo}-{hi - 1}: {got} of its {hi - lo} bytes came within the read's retry budget "
            "(DEW_GCS_RETRY_SECONDS); the server sends too slowly"
        )
    if left < remote._TIMEOUTS[1]:
        sock.settimeout(left)


def _answer(
    sock: socket.socket, lo: int, hi: int, deadline: float | None = None
) -> tuple[int, dict[str, str], memoryview | bytes]:
    data = bytearray()
    while (end := data.find(b"\r\n\r\n")) < 0:
        if len(data) > _HEAD_LIMIT:
            raise _Framing(f"an answer's headers run past {_HEAD_LIMIT} bytes")
        _receiving(sock, deadline, lo, hi, 0)
        try:
            chunk = sock.recv(1 << 16)
        except TimeoutError:
            _receiving(sock, deadline, lo, hi, 0)  # the budget's end cut this wait: say so
            raise
        if not chunk:
            raise ConnectionResetError("the connection closed before an answer")
        data += chunk
    lines = data[:end].decode("latin-1").split("\r\n")
    version, _, rest = lines[0].partition(" ")
    if not version.startswith("HTTP/1.") or not rest[:3].isdigit():
        raise _Framing(f"not an HTTP/1 status line: {lines[0][:80]!r}")
    status = int(rest[:3])
    head: dict[str, str] = {}
    for line in lines[1:]:
        name, _, value = line.partition(":")
        name, value = name.strip().lower(), value.strip()
        if name in head and name in ("content-length", "content-range") and head[name] != value:
            raise _Framing(f"two {name} headers")
        head[name] = value
    if version == "HTTP/1.0":
        head["connection"] = "close"
    have = memoryview(data)[end + 4 :]
    size = hi - lo
    if status == 200 and lo == 0 and head.get("content-length") == str(size):
        # The range asked was the whole object, and the server answered it whole (RFC 9110 lets it):
        # the same bytes, framed by Content-Length alone.
        head["content-range"] = f"bytes 0-{hi - 1}/{size}"
        status = 206
    if status != 206:
        return status, head, bytes(have)
    if "transfer-encoding" in head or head.get("content-encoding", "identity") != "identity":
        raise _Framing(f"range {lo}-{hi - 1} answered in an encoding ({head.get('transfer-encoding')})")
    if head.get("content-length") != str(size):
        raise _Framing(f"range {lo}-{hi - 1} answered with {head.get('content-length')} of {size} bytes")
    if not head.get("content-range", "").startswith(f"bytes {lo}-{hi - 1}/"):
        raise _Framing(f"range {lo}-{hi - 1} answered as {head.get('content-range')!r}")
    if len(have) > size:
        raise _Framing(f"range {lo}-{hi - 1} answered with bytes past its {size}")
    body = bytearray(size)
    view = memoryview(body)
    got = len(have)
    view[:got] = have
    while got < size:
        _receiving(sock, deadline, lo, hi, got)
        try:
            count = sock.recv_into(view[got:])
        except TimeoutError:
            _receiving(sock, deadline, lo, hi, got)
            raise
        if not count:
            raise _Framing(f"body cut off: range {lo}-{hi - 1} answered with {got} of {size} bytes")
        got += count
    if _pending(sock, closed_ok=True):
        raise _Framing(f"range {lo}-{hi - 1} answered with bytes past its {size}")
    return status, head, view


def _pending(sock: socket.socket, *, closed_ok: bool = False) -> bool:
    """Whether `sock` has bytes to read now (or, unless `closed_ok`, was closed by the server)."""
    if isinstance(sock, ssl.SSLSocket) and sock.pending():
        return True
    poller = select.poll()  # not select.select: a trainer's descriptors run past the 1023 it can watch
    poller.register(sock, select.POLLIN)
    if not poller.poll(0):
        return False
    if isinstance(sock, ssl.SSLSocket):
        return not closed_ok  # a close_notify or data: either way not a connection to reuse
    try:
        peeked = sock.recv(1, socket.MSG_PEEK | socket.MSG_DONTWAIT)
    except (BlockingIOError, InterruptedError):
        return False
    except OSError:
        return not closed_ok
    return bool(peeked) or not closed_ok


def _close(sock: socket.socket | None) -> None:
    if sock is not None:
        with contextlib.suppress(OSError):
            sock.close()


def _proxy_for(scheme: str, host: str) -> tuple[str, int, dict[str, str]] | None:
    """(host, port, CONNECT headers) of the proxy the environment names for `scheme`, None where none
    applies (NO_PROXY), as requests and dew.data.reach read it."""
    url = urllib.request.getproxies().get(scheme)
    if not url or urllib.request.proxy_bypass(host):
        return None
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    headers = {}
    if parts.username is not None:
        user = urllib.parse.unquote(parts.username)
        secret = urllib.parse.unquote(parts.password or "")
        headers["Proxy-Authorization"] = "Basic " + base64.b64encode(f"{user}:{secret}".encode()).decode()
    return parts.hostname or "", parts.port or 80, headers


def _token_request() -> Any:
    import google.auth.transport.requests

    return google.auth.transport.requests.Request()


@functools.lru_cache(maxsize=1 << 12)  # asked once a range request: quoting costs about 0.1 ms
def target(uri: str, generation: str | None) -> str:
    """The path and query, below the endpoint, of the media of `uri` (at `generation`, if given)."""
    bucket, _, name = uri[len("gs://") :].partition("/")
    query = "alt=media" if generation is None else f"alt=media&generation={urllib.parse.quote(generation)}"
    where = f"b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}"
    return f"/download/storage/v1/{where}?{query}"

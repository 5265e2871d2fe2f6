"""Fetching images by url, politely and within bounds: the one HTTP path of dew's url readers.

`Fetcher.get(url)` returns a response body or raises Dropped with one of REASONS; `fetch_image` adds
the pixel rules, so a caller counts every url as fetched or dropped for exactly one reason (REASONS
here, then pixels.REASONS). It is plain http.client, which gives what the pool needs and a library
would hide: the live sockets, so close() can cut a fetch hung on a slow server from another thread.

- Keep-alive: a finished exchange leaves its connection idle for the next url of that host.
- Per host: at most `per_host` requests in flight; a 429 or 503 stops the whole host until its
  Retry-After (or an exponential wait without one), up to `max_wait` — a host asking for longer is
  dropped at once rather than holding threads for it.
- Each attempt has a deadline of `timeout` seconds across connect, redirects and the body;
  timeouts, broken connections, 429 and 5xx are retried `retries` times. Other statuses are final.
- Redirects are followed up to `max_redirects`, and one back to a url already visited is a loop.
- A body over `max_bytes` is refused by its Content-Length or as it arrives.
- X-Robots-Tag noai / noimageai is honoured (img2dataset's opt-out): the body is never read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import email.utils
import errno
import http.client
import select
import socket
import ssl
import threading
import time
import urllib.parse

import numpy as np

from dew.data import validate
from dew.data.images import pixels

NO_IMAGE = "no_image"  # not an http(s) url, or the response is no image (HTML, JSON, empty)
HTTP_ERROR = "http_error"  # an error status, or the exchange broke (refused, reset, malformed)
TIMEOUT = "timeout"
ROBOTS_OPTOUT = "robots_optout"
TOO_LARGE = "too_large"
REDIRECT_LOOP = "redirect_loop"  # a redirect back to a url already visited, or too many of them
REASONS = (NO_IMAGE, HTTP_ERROR, TIMEOUT, ROBOTS_OPTOUT, TOO_LARGE, REDIRECT_LOOP)
DROP_REASONS = REASONS + pixels.REASONS

OPTOUT_DIRECTIVES = frozenset({"noai", "noimageai"})
_RETRIED = frozenset({429, 500, 502, 503, 504})
_BACKOFF = frozenset({429, 503})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_NOT_IMAGES = ("text/", "application/json", "application/xml", "application/javascript")
_CHUNK = 1 << 16
_TICK = 0.25  # how often a waiting thread looks whether the fetcher was closed


class Dropped(Exception):
    """A url that gave no usable image, for `reason` (one of DROP_REASONS)."""

    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(f"{reason}: {detail}")
        self.reason = reason


class FetchClosed(Exception):
    """The fetcher was closed while this fetch ran: the url has no outcome and is not counted."""


class _Retry(Exception):
    def __init__(self, reason: str, detail: str) -> None:
        super().__init__(detail)
        self.reason, self.detail = reason, detail


@dataclasses.dataclass(frozen=True, kw_only=True)
class FetchPolicy:
    """How politely and how far a fetch goes; timeout and retries are the reader's own fields."""

    per_host: int = 16
    max_redirects: int = 5
    max_bytes: int = 32 << 20
    max_wait: float = 60.0
    respect_optout: bool = True
    user_agent: str = "dew-data/1"

    def __post_init__(self) -> None:
        validate.fields(self, positive=("per_host", "max_bytes"), non_negative=("max_redirects",))
        if not self.max_wait >= 0:
            raise ValueError(f"FetchPolicy.max_wait must be non-negative seconds, got {self.max_wait!r}")


class _Host:
    def __init__(self, limit: int) -> None:
        self.slots = threading.BoundedSemaphore(limit)
        self.idle: list[http.client.HTTPConnection] = []
        self.not_before = 0.0
        self.refusals = 0  # 429/503 in a row, for the wait when no Retry-After says how long


class Fetcher:
    """Fetches url bodies for many threads at once; close() ends every fetch within a fraction of a second."""

    def __init__(self, *, timeout: float = 15.0, retries: int = 3, policy: FetchPolicy | None = None) -> None:
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        validate.non_negative_int("retries", retries)
        self.timeout, self.retries, self.policy = float(timeout), retries, policy or FetchPolicy()
        self._hosts: dict[tuple[str, str, int], _Host] = {}
        self._live: set[http.client.HTTPConnection] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._ssl: ssl.SSLContext | None = None

    def __enter__(self) -> Fetcher:
        return self

    def __exit__(self, *exc: object) -> None:
        self.close()

    def close(self) -> None:
        """Stops every fetch: waits end, and sockets in use are shut down so blocked reads return."""
        self._closed.set()
        with self._lock:
            connections = set(self._live)
            for host in self._hosts.values():
                connections.update(host.idle)
                host.idle.clear()
        for conn in connections:
            sock = conn.sock
            if sock is not None:
                with contextlib.suppress(OSError):  # closed meanwhile by the thread using it
                    sock.shutdown(socket.SHUT_RDWR)

    def get(self, url: str) -> bytes:
        """The body `url` answers with, or Dropped; FetchClosed once close() was called."""
        last = _Retry(HTTP_ERROR, "no attempt made")
        for _ in range(self.retries + 1):
            try:
                return self._attempt(url)
            except _Retry as retry:
                last = retry
        raise Dropped(last.reason, f"{url}: {last.detail} (after {self.retries + 1} attempts)")

    def _attempt(self, url: str) -> bytes:
        deadline, seen = None, {url}
        for _ in range(self.policy.max_redirects + 1):
            parts = urllib.parse.urlsplit(url)
            if parts.scheme not in ("http", "https") or not parts.hostname:
                raise Dropped(NO_IMAGE, f"{url!r} is not an http(s) url")
            key = (parts.scheme, parts.hostname, parts.port or (443 if parts.scheme == "https" else 80))
            with self._lock:
                host = self._hosts.setdefault(key, _Host(self.policy.per_host))
            # A host's backoff is its own wait and not charged to the deadline.
            waited = self._wait_for(host, url)
            deadline = deadline + waited if deadline else time.monotonic() + self.timeout
            answer = self._exchange(host, key, parts, deadline)
            if answer.location is None:
                return answer.body
            url = urllib.parse.urljoin(url, answer.location)
            if url in seen:
                raise Dropped(REDIRECT_LOOP, f"redirect back to {url}")
            seen.add(url)
        raise Dropped(REDIRECT_LOOP, f"more than {self.policy.max_redirects} redirects, the last to {url}")

    def _wait_for(self, host: _Host, url: str) -> float:
        """Waits out the host's backoff; the seconds waited."""
        wait = host.not_before - time.monotonic()
        if wait > self.policy.max_wait:
            raise Dropped(HTTP_ERROR, f"{url}: the host asked for {wait:.0f} s more than max_wait allows")
        if wait <= 0:
            return 0.0
        if self._closed.wait(wait):
            raise FetchClosed(url)
        return wait

    def _exchange(
        self, host: _Host, key: tuple[str, str, int], parts: urllib.parse.SplitResult, deadline: float
    ) -> _Answer:
        while not host.slots.acquire(timeout=min(_TICK, max(deadline - time.monotonic(), 0.001))):
            self._check(deadline)
        try:
            return self._request(host, key, parts, deadline)
        finally:
            host.slots.release()

    def _request(
        self, host: _Host, key: tuple[str, str, int], parts: urllib.parse.SplitResult, deadline: float
    ) -> _Answer:
        path = parts.path or "/"
        if parts.query:
            path += "?" + parts.query
        with self._lock:
            conn = host.idle.pop() if host.idle else None
        fresh = conn is None
        conn = conn or self._connection(key)
        with self._lock:
            self._live.add(conn)
        reusable = False
        try:
            try:
                response = self._send(conn, path, deadline)
            except (http.client.RemoteDisconnected, ConnectionResetError, BrokenPipeError):
                if fresh:
                    raise
                # The server closed the idle connection we kept; that is no failure of this url.
                conn.close()
                response = self._send(conn, path, deadline)
            answer = self._answer(host, conn, response, deadline)
            # Only a body read to its end leaves the connection ready for the next request.
            reusable = answer.location is None and not response.will_close
            return answer
        except TimeoutError:
            self._check(deadline)
            raise _Retry(TIMEOUT, f"no answer within {self.timeout:g} s") from None
        except (OSError, http.client.HTTPException) as error:
            self._check(deadline)
            raise _Retry(HTTP_ERROR, f"{type(error).__name__}: {error}") from None
        finally:
            with self._lock:
                self._live.discard(conn)
                if reusable and not self._closed.is_set():
                    host.idle.append(conn)
                    conn = None
            if conn is not None:
                conn.close()

    def _send(self, conn: http.client.HTTPConnection, path: str, deadline: float) -> http.client.HTTPResponse:
        conn.timeout = self._check(deadline)
        if conn.sock is not None:
            conn.sock.settimeout(conn.timeout)
        headers = {"User-Agent": self.policy.user_agent, "Accept": "image/*, */*;q=0.5"}
        conn.request("GET", path, headers=headers)
        return conn.getresponse()

    def _answer(
        self, host: _Host, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float
    ) -> _Answer:
        status = response.status
        if status in _REDIRECTS and response.getheader("Location"):
            return _Answer(location=response.getheader("Location"))
        if status in _BACKOFF:
            host.refusals += 1
            wait = _retry_after(response.getheader("Retry-After"))
            wait = min(2.0 ** (host.refusals - 1) if wait is None else wait, self.policy.max_wait + 1)
            host.not_before = max(host.not_before, time.monotonic() + wait)
        if status != 200:
            reason = f"HTTP {status} {response.reason}"
            raise _Retry(HTTP_ERROR, reason) if status in _RETRIED else Dropped(HTTP_ERROR, reason)
        host.refusals = 0
        if self.policy.respect_optout and opted_out(response.msg.get_all("X-Robots-Tag") or [], self.policy):
            raise Dropped(ROBOTS_OPTOUT, f"X-Robots-Tag: {', '.join(response.msg.get_all('X-Robots-Tag'))}")
        kind = (response.getheader("Content-Type") or "").lower()
        if kind.startswith(_NOT_IMAGES):
            raise Dropped(NO_IMAGE, f"the response is {kind}")
        length = response.getheader("Content-Length")
        if length and length.isdigit() and int(length) > self.policy.max_bytes:
            raise Dropped(TOO_LARGE, f"Content-Length {length} is over {self.policy.max_bytes} bytes")
        body = bytearray()
        while chunk := self._read(conn, response, deadline):
            body += chunk
            if len(body) > self.policy.max_bytes:
                raise Dropped(TOO_LARGE, f"the body runs past {self.policy.max_bytes} bytes")
        short = response.length  # what a Content-Length promised and the connection never brought
        # read1 leaves a response whose length ran out open, and http.client reuses no connection until it is closed.
        response.close()
        self._check(deadline)
        if short:
            raise _Retry(HTTP_ERROR, f"the body ended {short} bytes short")
        if not body:
            raise Dropped(NO_IMAGE, "the response is empty")
        return _Answer(body=bytes(body))

    def _read(self, conn: http.client.HTTPConnection, response: http.client.HTTPResponse, deadline: float) -> bytes:
        # A fresh socket timeout before every read keeps a server that trickles bytes inside the deadline.
        if conn.sock is not None:
            conn.sock.settimeout(self._check(deadline))
        return response.read1(_CHUNK)

    def _check(self, deadline: float) -> float:
        """The seconds left before `deadline`; FetchClosed or a timeout when there are none."""
        if self._closed.is_set():
            raise FetchClosed()
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Retry(TIMEOUT, f"no answer within {self.timeout:g} s")
        return left

    def _connection(self, key: tuple[str, str, int]) -> http.client.HTTPConnection:
        scheme, hostname, port = key
        if scheme == "https":
            if self._ssl is None:
                self._ssl = ssl.create_default_context()
            conn: http.client.HTTPConnection = http.client.HTTPSConnection(hostname, port, context=self._ssl)
        else:
            conn = http.client.HTTPConnection(hostname, port)
        # http.client's own hook for opening the socket: ours connects in slices that close() can end.
        conn._create_connection = self._connect  # type: ignore[attr-defined]
        return conn

    def _connect(self, address: tuple[str, int], timeout: float, source_address: object = None) -> socket.socket:
        deadline = time.monotonic() + timeout
        error: OSError = OSError(f"{address[0]} has no address")
        for family, kind, proto, _, where in socket.getaddrinfo(*address, type=socket.SOCK_STREAM):
            sock = socket.socket(family, kind, proto)
            try:
                sock.setblocking(False)
                code = sock.connect_ex(where)
                while code == errno.EINPROGRESS:
                    if select.select([], [sock], [], min(_TICK, self._check(deadline)))[1]:
                        code = sock.getsockopt(socket.SOL_SOCKET, socket.SO_ERROR)
                if code:
                    raise OSError(code, f"connect to {address[0]}:{address[1]}: {errno.errorcode.get(code, code)}")
                sock.settimeout(timeout)
                return sock
            except OSError as failed:
                sock.close()
                error = failed
            except BaseException:
                sock.close()
                raise
        raise error


@dataclasses.dataclass(frozen=True)
class _Answer:
    """One exchange's outcome: where a redirect points, or the body of the image."""

    location: str | None = None
    body: bytes = b""


def opted_out(values: list[str], policy: FetchPolicy) -> bool:
    """Whether X-Robots-Tag `values` opt the image out of AI use for us.

    A directive list prefixed by a crawler's name ("otherbot: noai") binds that crawler only; an
    unprefixed list binds everyone.
    """
    agent = policy.user_agent.split("/", 1)[0].strip().lower()
    for value in values:
        name, colon, rest = value.partition(":")
        if colon and " " not in name.strip() and name.strip().lower() not in ("", agent):
            continue  # a list addressed to another crawler
        directives = rest if colon and " " not in name.strip() else value
        if OPTOUT_DIRECTIVES & {d.strip().lower() for d in directives.split(",")}:
            return True
    return False


def _retry_after(value: str | None) -> float | None:
    if not value:
        return None
    if value.strip().isdigit():
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError):
        return None
    return max(0.0, when.timestamp() - time.time())


def fetch_image(fetcher: Fetcher, url: str, *, rules: pixels.ImageRules, size: int | None = None) -> np.ndarray:
    """The RGB pixels at `url` that pass `rules`, or Dropped with the reason (DROP_REASONS)."""
    data = fetcher.get(url)
    try:
        return pixels.decode(data, rules=rules, size=size)
    except pixels.ImageRejected as error:
        raise Dropped(error.reason, f"{url}: {error}") from None

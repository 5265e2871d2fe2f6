"""Fetching images by url, politely and within bounds: the one HTTP path of dew's url readers.

`Fetcher.get(url)` returns a response body or raises Dropped with one of REASONS; `fetch_image` adds
the pixel rules, so a caller counts every url as fetched or dropped for exactly one reason (REASONS
here, then pixels.REASONS), whatever the string or the server. The url is parsed as a browser would
(dew.data.images.urls) and the exchange is dew's own HTTP/1.1 (dew.data.images.http_wire), which keeps
the sockets in view, so close() can cut a fetch hung on a slow server from another thread.

- One deadline: each attempt has `timeout` seconds of wall clock for the name lookup, connect, TLS,
  every redirect, the head and the body, however the server paces its bytes; timeouts, broken
  exchanges, 429 and 5xx are retried `retries` times, other statuses are final. A fetch therefore ends
  within timeout × (retries + 1) plus its politeness waits: the host's backoff (each at most `max_wait`)
  and its turn among the host's `per_host` requests in flight, neither charged to the deadline.
- Keep-alive: a connection goes back to its host only after an exchange framed exactly (a Content-Length
  met to the byte, a chunked body ended cleanly) with nothing past its end, and is dropped should
  anything arrive while it waits.
- Per host: at most `per_host` requests in flight; a 429 or 503 stops the whole host until its
  Retry-After (or an exponential wait without one), up to `max_wait` — a host asking for longer is
  dropped at once rather than holding threads for it.
- Redirects are followed up to `max_redirects`, and one back to a url already visited is a loop.
- A body over `max_bytes` is refused by its Content-Length, as it arrives or as it decompresses: a gzip or
  deflate Content-Encoding is undone before the body is judged, another coding is an http_error.
- A redirect with two different Locations is an http_error: which to follow would be a guess.
- X-Robots-Tag noai / noimageai is honoured (img2dataset's opt-out; dew.data.images.robots_tag): the body
  is never read.
"""

from __future__ import annotations

import contextlib
import dataclasses
import socket
import ssl
import threading
import time
from typing import Any

import numpy as np

from dew.data import validate
from dew.data.images import http_wire, pixels, robots_tag, urls
from dew.data.images.http_wire import Broken, Connection, Oversize, Response, Stale
from dew.data.retries import retry_after

BAD_URL = "bad_url"  # no url a browser would fetch: another scheme, no host, a bad port or IPv6 host, ...
NO_IMAGE = "no_image"  # the response is no image (HTML, JSON, XML, empty), whatever its Content-Type says
HTTP_ERROR = "http_error"  # an error status, or the exchange broke (refused, reset, malformed, cut short)
TIMEOUT = "timeout"
ROBOTS_OPTOUT = "robots_optout"
TOO_LARGE = "too_large"
REDIRECT_LOOP = "redirect_loop"  # a redirect back to a url already visited, or too many of them
REASONS = (BAD_URL, NO_IMAGE, HTTP_ERROR, TIMEOUT, ROBOTS_OPTOUT, TOO_LARGE, REDIRECT_LOOP)
DROP_REASONS = REASONS + pixels.REASONS

OPTOUT_DIRECTIVES = robots_tag.OPTOUT
_RETRIED = frozenset({429, 500, 502, 503, 504})
_BACKOFF = frozenset({429, 503})
_REDIRECTS = frozenset({301, 302, 303, 307, 308})
_NOT_IMAGES = ("text/", "application/json", "application/xml", "application/javascript")
_MARKUP = (b"<", b"\xef\xbb\xbf<")  # an HTML, XML or SVG document, with or without a byte-order mark
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
        if not self.user_agent.isascii() or not self.user_agent.isprintable() or not self.user_agent.strip():
            raise ValueError(f"FetchPolicy.user_agent must be printable ASCII, got {self.user_agent!r}")

    @property
    def crawler(self) -> str:
        """The product token X-Robots-Tag names this crawler by: the user agent's first word."""
        return self.user_agent.split("/", 1)[0].split()[0]


class _Host:
    def __init__(self, limit: int) -> None:
        self.slots = threading.BoundedSemaphore(limit)
        self.idle: list[Connection] = []
        self.not_before = 0.0
        self.refusals = 0  # 429/503 in a row, for the wait when no Retry-After says how long


@dataclasses.dataclass(frozen=True)
class _Answer:
    """One exchange's outcome: where a redirect points, or the body of the image."""

    location: str | None = None
    body: bytes = b""


class Fetcher:
    """Fetches url bodies for many threads at once; close() ends every fetch within a fraction of a second."""

    def __init__(
        self, *, timeout: float = 15.0, retries: int = 3, policy: FetchPolicy | None = None, shared: Any = None
    ) -> None:
        """shared: the per_host limit of several fetchers together (online_pool.HostSlots), besides this one's own."""
        if not timeout > 0:
            raise ValueError(f"timeout must be positive seconds, got {timeout!r}")
        validate.non_negative_int("retries", retries)
        self.timeout, self.retries, self.policy = float(timeout), retries, policy or FetchPolicy()
        self._headers = (
            ("User-Agent", self.policy.user_agent),
            ("Accept", "image/*, */*;q=0.5"),
            ("Accept-Encoding", "gzip, deflate"),  # what http_wire.decoded undoes; without it any coding is allowed
        )
        self._hosts: dict[tuple[str, str, int], _Host] = {}
        self._live: set[Connection] = set()
        self._lock = threading.Lock()
        self._closed = threading.Event()
        self._resolver = http_wire.Resolver()
        self._ssl: ssl.SSLContext | None = None
        self._shared = shared

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
            with contextlib.suppress(OSError):  # closed meanwhile by the thread using it
                conn.sock.shutdown(socket.SHUT_RDWR)

    def get(self, url: str) -> bytes:
        """The body `url` answers with, or Dropped; FetchClosed once close() was called."""
        try:
            first = urls.target(url)
        except urls.BadUrl as error:
            raise Dropped(BAD_URL, str(error)) from None
        last = _Retry(HTTP_ERROR, "no attempt made")
        for _ in range(self.retries + 1):
            try:
                return self._attempt(first)
            except _Retry as retry:
                last = retry
        raise Dropped(last.reason, f"{first.url}: {last.detail} (after {self.retries + 1} attempts)")

    def _attempt(self, target: urls.Target) -> bytes:
        deadline: float | None = None
        seen = {target.url}
        for _ in range(self.policy.max_redirects + 1):
            with self._lock:
                host = self._hosts.setdefault(target.origin, _Host(self.policy.per_host))
            # Waiting out the host's backoff and for a turn among its per_host requests is politeness, not the
            # server's slowness: neither is charged to the deadline, so a timeout always means the server's.
            waited = self._turn(host, target)
            deadline = deadline + waited if deadline else time.monotonic() + self.timeout
            try:
                answer = self._exchange(host, target, deadline)
            finally:
                self._release(host, target)
            if answer.location is None:
                return answer.body
            try:
                target = urls.join(target, answer.location)
            except urls.BadUrl as error:
                raise Dropped(BAD_URL, f"{target.url} redirects to no url: {error}") from None
            if target.url in seen:
                raise Dropped(REDIRECT_LOOP, f"redirect back to {target.url}")
            seen.add(target.url)
        raise Dropped(REDIRECT_LOOP, f"more than {self.policy.max_redirects} redirects, the last to {target.url}")

    def _turn(self, host: _Host, target: urls.Target) -> float:
        """Waits for one of the host's slots outside its backoff (the caller releases the slot); the seconds waited.
        A 429 may come while a fetch waits for its slot: the backoff is looked at again once the slot is held."""
        waited = 0.0
        while True:
            waited += self._wait_for(host, target.url)
            waited += self._take_slot(host, target)
            if host.not_before <= time.monotonic():
                return waited
            self._release(host, target)

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

    def _take_slot(self, host: _Host, target: urls.Target) -> float:
        """Waits for one of the host's per_host slots, and the shared limit's (the caller releases them with
        _release); the seconds waited."""
        started = time.monotonic()
        while not host.slots.acquire(timeout=_TICK):
            if self._closed.is_set():
                raise FetchClosed(target.url)
        while self._shared is not None and not self._shared.acquire(target.origin, _TICK):
            if self._closed.is_set():
                host.slots.release()
                raise FetchClosed(target.url)
        return time.monotonic() - started

    def _release(self, host: _Host, target: urls.Target) -> None:
        if self._shared is not None:
            self._shared.release(target.origin)
        host.slots.release()

    def _exchange(self, host: _Host, target: urls.Target, deadline: float) -> _Answer:
        try:
            return self._request(host, target, deadline)
        except TimeoutError:
            self._left(deadline)
            raise _Retry(TIMEOUT, f"no answer within {self.timeout:g} s") from None
        except (OSError, Broken) as error:
            self._left(deadline)
            raise _Retry(HTTP_ERROR, f"{type(error).__name__}: {error}") from None

    def _request(self, host: _Host, target: urls.Target, deadline: float) -> _Answer:
        def left() -> float:
            return self._left(deadline)

        while True:
            conn = self._idle(host)
            fresh = conn is None
            if conn is None:
                addresses = self._resolver.addresses(target.host, target.port, left)
                conn = http_wire.connect(target, addresses, left, self._tls() if target.scheme == "https" else None)
            with self._lock:
                self._live.add(conn)
            reusable = False
            try:
                response = conn.exchange(target, self._headers, left)
                answer, reusable = self._answer(host, conn, response, left)
                return answer
            except Stale:
                if fresh:
                    raise
                continue  # the server closed the connection we kept; that is no failure of this url
            finally:
                with self._lock:
                    self._live.discard(conn)
                    kept = reusable and not self._closed.is_set()
                    if kept:
                        host.idle.append(conn)
                if not kept:
                    conn.close()

    def _idle(self, host: _Host) -> Connection | None:
        """A kept connection to the host on which nothing has arrived while it waited, if there is one."""
        while True:
            with self._lock:
                conn = host.idle.pop() if host.idle else None
            if conn is None or conn.clean():
                return conn
            conn.close()  # the server closed it, or sent what no request asked for

    def _answer(self, host: _Host, conn: Connection, response: Response, left: http_wire.Left) -> tuple[_Answer, bool]:
        """What the response means, and whether its connection may serve the next request."""
        status = response.status
        if status != 200:
            reusable = conn.drained(response) and conn.finished(response)
            locations = set(response.all("location")) - {""}
            if status in _REDIRECTS and len(locations) > 1:  # which to follow would be a guess (so says Chromium)
                raise Dropped(HTTP_ERROR, f"HTTP {status} names {len(locations)} different Locations")
            if status in _REDIRECTS and locations:
                location = locations.pop()
                return _Answer(location=location.encode("latin-1").decode("utf-8", "replace")), reusable
            self._note_refusal(host, response)
            reason = f"HTTP {status} {response.reason}".strip()
            raise _Retry(HTTP_ERROR, reason) if status in _RETRIED else Dropped(HTTP_ERROR, reason)
        host.refusals = 0
        tags = response.all("x-robots-tag")
        if self.policy.respect_optout and robots_tag.opted_out(tags, self.policy.crawler):
            raise Dropped(ROBOTS_OPTOUT, f"X-Robots-Tag: {', '.join(tags)}")
        kind = (response.header("content-type") or "").lower()
        if kind.startswith(_NOT_IMAGES):
            raise Dropped(NO_IMAGE, f"the response is {kind}")
        try:
            body = conn.body(response, left, self.policy.max_bytes)
            reusable = conn.finished(response)
            body = http_wire.decoded(response, body, self.policy.max_bytes)
        except Oversize as error:
            raise Dropped(TOO_LARGE, str(error)) from None
        except http_wire.Unsupported as error:
            raise Dropped(HTTP_ERROR, str(error)) from None
        if not body:
            raise Dropped(NO_IMAGE, "the response is empty")
        if body.lstrip(b" \t\r\n").startswith(_MARKUP):
            raise Dropped(NO_IMAGE, f"the response is a markup document ({bytes(body[:40])!r}...), not an image")
        return _Answer(body=body), reusable

    def _note_refusal(self, host: _Host, response: Response) -> None:
        if response.status in _BACKOFF:
            host.refusals += 1
            wait = retry_after(response.header("retry-after"))
            wait = min(2.0 ** (host.refusals - 1) if wait is None else wait, self.policy.max_wait + 1)
            host.not_before = max(host.not_before, time.monotonic() + wait)

    def _left(self, deadline: float) -> float:
        """The seconds left before `deadline`; FetchClosed or a timeout when there are none."""
        if self._closed.is_set():
            raise FetchClosed()
        left = deadline - time.monotonic()
        if left <= 0:
            raise _Retry(TIMEOUT, f"no answer within {self.timeout:g} s")
        return left

    def _tls(self) -> ssl.SSLContext:
        if self._ssl is None:
            self._ssl = ssl.create_default_context()
        return self._ssl


def opted_out(values: list[str], policy: FetchPolicy) -> bool:
    """Whether X-Robots-Tag `values` opt the image out of AI use for this policy's crawler."""
    return robots_tag.opted_out(values, policy.crawler)


def fetch_image(
    fetcher: Fetcher, url: str, *, rules: pixels.ImageRules, size: int | None = None, convert: bool = True
) -> np.ndarray:
    """The RGB pixels at `url` that pass `rules`, or Dropped with the reason (DROP_REASONS); convert as
    pixels.decode has it (False: an image not stored as RGB is dropped as not_rgb)."""
    data = fetcher.get(url)
    try:
        return pixels.decode(data, rules=rules, size=size, convert=convert)
    except pixels.ImageRejected as error:
        raise Dropped(error.reason, f"{url}: {error}") from None

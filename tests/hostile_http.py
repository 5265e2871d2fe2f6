"""A hostile HTTP/1.1 server on 127.0.0.1: honest urls serving an image each, beside every way a server lies.

A url is /<behaviour>/<i>[/anything]; BEHAVIOURS says what each behaviour answers and the reason a fetcher
drops it for (None: the image is fetched). Image i is a crop of its own of a skimage.data photograph, JPEG
for even i and PNG for odd, so bytes and pixels differ from url to url and a record holding another url's
image is told apart. Connections are kept alive and every behaviour answers on whatever connection its
request came on, so a lying answer and an honest one meet on one connection, as they do on the web.

The server is threaded, listens on 127.0.0.1 only, never waits on a client without looking at its stop
event, and stops by itself after LIFETIME seconds if no one stops it. `requests` counts, per path, the
requests that are attempts of a fetch (see `_count`); a second server (`other`) is where "elsewhere"
redirects to.
"""

from __future__ import annotations

import contextlib
import socket
import struct
import threading
import time
from collections import Counter

from tests import hostile_framing as framing
from tests.hostile_wire import IMAGES, chunks, head, image, kind, response

LIFETIME = 300.0  # the server stops after this long whoever forgets it
DRIP_SECONDS = 0.5  # a dripping answer's pace: one byte each
CUT = 64  # the bytes a lying Content-Length is off by
_TICK = 0.1

# behaviour → the reason a fetcher with at least one retry drops it for; None where the image is fetched.
BEHAVIOURS: dict[str, str | None] = {
    "honest": None,  # 200 with an exact Content-Length
    "chunked": None,  # 200 in chunks of 1000 bytes, ended cleanly
    "extra": None,  # its own image, then a whole second response (another image) nobody asked for
    "busy": None,  # 429 with Retry-After: 1 at the first request of the path, the image after
    "elsewhere": None,  # 302 to the image on the other server (another port)
    "cl_short": "truncated",  # Content-Length half the body, then the whole body: the rest is stray bytes
    "cl_long": "timeout",  # Content-Length 64 over the body, then silence on an open connection
    "short_close": "http_error",  # half the body of an exact Content-Length, then the connection closed
    "chunk_cut": "http_error",  # chunked, closed inside the second chunk
    "reset": "http_error",  # the request read, then the connection reset (SO_LINGER 0)
    "drip_head": "timeout",  # the response head one byte every DRIP_SECONDS
    "drip_body": "timeout",  # the head at once, the body one byte every DRIP_SECONDS
    "drip_chunk": "timeout",  # chunked, every chunk-size line one byte every DRIP_SECONDS
    "silent": "timeout",  # the request read, never an answer
    "loop": "redirect_loop",  # /loop/i → /loop/i/b → /loop/i/c → /loop/i/b
    "html": "no_image",  # an HTML page sent as image/jpeg
    "missing": "http_error",  # 404
    "smuggle": None,  # Content-Length and chunked both, the image chunked, then a second response after it
    "early_hints": None,  # 103 Early Hints, then the image
    "close_delimited": None,  # HTTP/1.0 with no Content-Length: the image ends where the connection does
    "no_content": "http_error",  # 204, then another image's whole response nobody asked for
    "cl_twice": "http_error",  # two Content-Length headers that disagree
    "huge_head": "http_error",  # a header block of 96 KiB
    **framing.FRAMING,  # lengths, codings, chunk syntax, limits, interim answers, redirects: tests/hostile_framing.py
}
_FINAL = frozenset({"missing", "no_content"}) | framing.FINAL  # error statuses no retry asks again
# Behaviours whose every attempt fails: a fetch of one makes retries + 1 requests; every other makes one
# (busy: two, the first time).
RETRIED = frozenset(b for b, reason in BEHAVIOURS.items() if reason in ("timeout", "http_error") and b not in _FINAL)


class HostileServer:
    """One listening socket and a thread per connection; see the module docstring for what it serves."""

    def __init__(self, other: HostileServer | None = None) -> None:
        self.other = other
        self.listener = socket.create_server(("127.0.0.1", 0), backlog=128)
        self.listener.settimeout(_TICK)
        self.port = self.listener.getsockname()[1]
        self.stopping = threading.Event()
        self.until = time.monotonic() + LIFETIME
        self.lock = threading.Lock()
        self.requests: Counter[str] = Counter()
        self.connections = 0
        self._open: set[socket.socket] = set()
        self._threads: list[threading.Thread] = []
        self._accepting = threading.Thread(target=self._serve, name="hostile-accept", daemon=True)
        self._accepting.start()

    @property
    def base(self) -> str:
        return f"http://127.0.0.1:{self.port}"

    def url(self, behaviour: str, i: int) -> str:
        return f"{self.base}/{behaviour}/{i}"

    def requests_to(self, url: str) -> int:
        """The attempts made at `url` (a url of this server, as a list may write it) so far."""
        from dew.data.images.urls import target

        with self.lock:
            return self.requests[target(url).path]

    def stop(self) -> None:
        self.stopping.set()
        self._accepting.join()
        self.listener.close()
        with self.lock:
            live = list(self._open)
        for conn in live:
            with contextlib.suppress(OSError):
                conn.shutdown(socket.SHUT_RDWR)
        for thread in self._threads:
            thread.join(timeout=5)

    def _over(self) -> bool:
        return self.stopping.is_set() or time.monotonic() > self.until

    def _serve(self) -> None:
        while not self._over():
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            except OSError:
                return
            with self.lock:
                self.connections += 1
                self._open.add(conn)
            thread = threading.Thread(target=self._connection, args=(conn,), name="hostile-conn", daemon=True)
            self._threads.append(thread)
            thread.start()

    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(_TICK)
        buffer, first = b"", True
        poisoned: int | None = None  # once a POISON answer went out: the i every later answer mislabels
        try:
            while not self._over():
                while b"\r\n\r\n" not in buffer:
                    data = self._recv(conn)
                    if not data:
                        return
                    buffer += data
                request, buffer = buffer.split(b"\r\n\r\n", 1)
                path = request.split(b"\r\n", 1)[0].split(b" ")[1].decode("ascii", "replace")
                if poisoned is not None:  # the fetcher should have let this connection go
                    self._count(path, first, "poisoned")
                    framing.poisoned(conn, poisoned)
                    continue
                if not self._answer(conn, path, first):
                    return
                if path.strip("/").split("/")[0] in framing.POISON:
                    poisoned = behaviour_of(path)[1]
                first = False
        except OSError:
            return  # the client gave up on this connection: a timeout, a close, a size limit
        finally:
            with self.lock:
                self._open.discard(conn)
            conn.close()

    def _recv(self, conn: socket.socket) -> bytes:
        """The next bytes from the client, b"" at its close or the server's stop."""
        while not self._over():
            try:
                return conn.recv(65536)
            except TimeoutError:
                continue
        return b""

    def _hold(self, conn: socket.socket) -> bool:
        """Says nothing until the client closes or sends more, or the server stops; False: end the connection."""
        self._recv(conn)
        return False

    def _drip(self, conn: socket.socket, data: bytes) -> bool:
        for byte in data:
            if self.stopping.wait(DRIP_SECONDS) or self._over():
                return False
            conn.sendall(bytes([byte]))
        return True

    def _count(self, path: str, first: bool, behaviour: str) -> None:
        # A reset met on a kept connection before a byte of the answer is, to a client, a connection the
        # server closed while it was idle: it asks again on a fresh one, and that is no attempt of the fetch.
        if behaviour != "reset" or first:
            with self.lock:
                self.requests[path] += 1

    def _answer(self, conn: socket.socket, path: str, first: bool) -> bool:
        """Answers one request; whether the connection reads the next."""
        parts = path.strip("/").split("/")
        behaviour = parts[0]
        try:
            i = int(parts[1])
            body = image(i)
        except (IndexError, ValueError):
            conn.sendall(response(b"no such url", "text/plain", status="404 Not Found"))
            return True
        self._count(path, first, behaviour)
        mime = kind(i)
        if behaviour == "honest" or (behaviour == "busy" and self.requests[path] > 1):
            conn.sendall(response(body, mime))
        elif behaviour == "busy":
            conn.sendall(response(b"slow down", "text/plain", status="429 Too Many Requests", **{"Retry-After": "1"}))
        elif behaviour == "chunked":
            conn.sendall(head("200 OK", {"Content-Type": mime, "Transfer-Encoding": "chunked"}))
            conn.sendall(b"".join(chunks(body)) + b"0\r\n\r\n")
        elif behaviour == "extra":
            smuggled = image((i + 1) % IMAGES)
            conn.sendall(response(body, mime) + response(smuggled, kind(i + 1)))
        elif behaviour == "elsewhere":
            where = f"{self.other.base}/honest/{i}" if self.other else "/missing/0"
            conn.sendall(response(b"", "text/plain", status="302 Found", Location=where))
        elif behaviour == "cl_short":
            conn.sendall(response(body, mime, length=len(body) // 2))
        elif behaviour == "cl_long":
            conn.sendall(response(body, mime, length=len(body) + CUT))
            return self._hold(conn)
        elif behaviour == "short_close":
            conn.sendall(response(body, mime)[: -len(body) // 2])
            return False
        elif behaviour == "chunk_cut":
            pieces = chunks(body)
            conn.sendall(head("200 OK", {"Content-Type": mime, "Transfer-Encoding": "chunked"}))
            conn.sendall(pieces[0] + pieces[1][: len(pieces[1]) // 2])
            return False
        elif behaviour == "reset":
            conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
            return False
        elif behaviour == "drip_head":
            return self._drip(conn, response(body, mime))
        elif behaviour == "drip_body":
            conn.sendall(head("200 OK", {"Content-Type": mime, "Content-Length": str(len(body))}))
            return self._drip(conn, body)
        elif behaviour == "drip_chunk":
            conn.sendall(head("200 OK", {"Content-Type": mime, "Transfer-Encoding": "chunked"}))
            for chunk in chunks(body):
                size, _, rest = chunk.partition(b"\r\n")
                if not self._drip(conn, size + b"\r\n"):
                    return False
                conn.sendall(rest)
            conn.sendall(b"0\r\n\r\n")
        elif behaviour == "silent":
            return self._hold(conn)
        elif behaviour == "loop":
            after = {2: f"/loop/{i}/b", 3: f"/loop/{i}/c" if parts[2:] == ["b"] else f"/loop/{i}/b"}[min(len(parts), 3)]
            conn.sendall(response(b"", "text/plain", status="302 Found", Location=after))
        elif behaviour == "html":
            conn.sendall(response(b"<!doctype html><html><body>not an image</body></html>", "image/jpeg"))
        elif behaviour == "smuggle":
            lying = head("200 OK", {"Content-Type": mime, "Content-Length": "10", "Transfer-Encoding": "chunked"})
            smuggled = image((i + 1) % IMAGES)
            conn.sendall(lying + b"".join(chunks(body)) + b"0\r\n\r\n" + response(smuggled, kind(i + 1)))
        elif behaviour == "early_hints":
            conn.sendall(head("103 Early Hints", {"Link": "</style.css>; rel=preload"}) + response(body, mime))
        elif behaviour == "close_delimited":
            conn.sendall(b"HTTP/1.0 200 OK\r\nContent-Type: " + mime.encode() + b"\r\n\r\n" + body)
            return False
        elif behaviour == "no_content":
            smuggled = image((i + 1) % IMAGES)
            conn.sendall(head("204 No Content", {}) + response(smuggled, kind(i + 1)))
        elif behaviour == "cl_twice":
            conn.sendall(head("200 OK", {"Content-Type": mime, "Content-Length": str(len(body))})[:-2])
            conn.sendall(b"Content-Length: %d\r\n\r\n" % (len(body) - CUT) + body)
        elif behaviour == "huge_head":
            filler = "".join(f"X-Filler-{n}: {'x' * 1000}\r\n" for n in range(96)).encode()
            conn.sendall(b"HTTP/1.1 200 OK\r\n" + filler + b"Content-Length: %d\r\n\r\n" % len(body) + body)
        elif behaviour in framing.FRAMING:
            return framing.answer(self, conn, behaviour, i)
        else:
            conn.sendall(response(b"no such image", "text/plain", status="404 Not Found"))
        return True

    def other_base(self) -> str:
        """Where a redirect "elsewhere" goes: the other server, or this one where there is none."""
        return self.other.base if self.other else self.base

    def hold(self, conn: socket.socket) -> bool:
        return self._hold(conn)


class HostileWeb:
    """Two hostile servers (the second is where "elsewhere" redirects) and what each url of them serves."""

    def __init__(self) -> None:
        for i in range(IMAGES):  # made before any request, so no answer waits on encoding its image
            image(i)
        self.other = HostileServer()
        self.main = HostileServer(other=self.other)

    def url(self, behaviour: str, i: int) -> str:
        return self.main.url(behaviour, i)

    def outcome(self, url: str, retries: int) -> str | None:
        """The reason a fetch with `retries` drops `url` for, None where it is fetched."""
        if url in self.bad_urls():
            return "bad_url"
        return reason(behaviour_of(url)[0], retries)

    def bad_urls(self) -> list[str]:
        """Url strings no browser would fetch, each naming an honest url of this server."""
        port = self.main.port
        return [
            "http://127.0.0.1:99999/honest/60",
            "http://[::1/honest/61",
            "http://[fe80::zz]/honest/62",
            f"ftp://127.0.0.1:{port}/honest/63",
            "http://exa mple.com/honest/60",
            "http://:80/honest/61",
        ]

    def odd_urls(self, first: int) -> list[str]:
        """Honest urls written as a careless list writes them: a space, non-ASCII, a backslash, spaces around."""
        base = self.main.base
        return [
            f"{base}/honest/{first}/a b.jpg",
            f"{base}/honest/{first + 1}/ünï.jpg",
            f"{base}\\honest/{first + 2}",
            f"  {base}/honest/{first + 3}#fragment \t",
        ]

    def every_behaviour(self, first: int = 0) -> list[str]:
        """One url of every behaviour, image i from `first` on."""
        return [self.url(behaviour, first + n) for n, behaviour in enumerate(BEHAVIOURS)]

    def served(self, url: str) -> bytes | None:
        """The body `url`'s answer frames (a Content-Length that lies short frames less than was sent), None
        where no whole body is framed."""
        behaviour, i = behaviour_of(url)
        if behaviour == "cl_short":
            return image(i)[: len(image(i)) // 2]
        return image(i) if BEHAVIOURS.get(behaviour, "") is None else None

    def stop(self) -> None:
        self.main.stop()
        self.other.stop()


def behaviour_of(url: str) -> tuple[str, int]:
    """(behaviour, i) of a url of a hostile server (a suffix after /<behaviour>/<i> changes neither)."""
    parts = url.strip().replace("\\", "/").split("://", 1)[-1].split("#")[0].split("/")
    return parts[1], int(parts[2])


def reason(behaviour: str, retries: int) -> str | None:
    """The reason a fetch with `retries` drops `behaviour` for: a 429 with no retry left is an http_error."""
    return "http_error" if behaviour == "busy" and not retries else BEHAVIOURS[behaviour]


def outcomes(behaviour: str, requests: int, retries: int) -> dict[str | None, float]:
    """The finished fetches `requests` attempts at a url of `behaviour` are, by reason (None: fetched), once no
    fetch of it is running (fractions while one is)."""
    if behaviour in RETRIED:
        return {BEHAVIOURS[behaviour]: requests / (retries + 1)}
    if behaviour == "busy":  # the first request only is refused: with a retry left it is asked again
        if retries:
            return {None: max(0, requests - 1)}
        return {"http_error": min(1, requests), None: max(0, requests - 1)}
    return {BEHAVIOURS[behaviour]: requests}

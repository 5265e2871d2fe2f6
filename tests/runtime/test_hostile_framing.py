"""The fetcher against framing attacks (tests/hostile_framing.py): malformed or doubled lengths, transfer and content
codings, chunk syntax, header limits, close-delimited bodies, interim answers, bodiless statuses and redirects.

Every hostile url has an honest neighbour with an image of its own fetched right after it on the same host, one
request at a time, so the connection the hostile answer came on is the one the neighbour would be asked on if it
were kept: an answer whose framing was not exact, or that asked to close, spoils the neighbour's bytes if its
connection is reused (a POISON connection answers any later request with another url's image)."""

from __future__ import annotations

import gzip
import socket
import threading

import pytest
from hypothesis import event, given, settings
from hypothesis import strategies as st

from dew.data.images import http_wire, urls
from dew.data.images.fetch import Fetcher, FetchPolicy

pytest.importorskip("skimage.data")

from tests.hang_guard import bounded
from tests.hostile_framing import FRAMING, POISON
from tests.hostile_http import HostileWeb
from tests.runtime.test_hostile_fetch import check_attempts, check_outcomes, fetch_all

TIMEOUT = 1.0
CLOSE_AFTER = 0.05  # seconds the socket-pair server waits before it closes a connection the client still reads
GUARD = 300.0  # a hang guard, never a speed test


def paired(web: HostileWeb, behaviours: list[str]) -> list[str]:
    """Each behaviour's url followed by an honest url, every url with an image of its own."""
    hostile = [web.url(behaviour, n) for n, behaviour in enumerate(behaviours)]
    honest = [web.url("honest", len(hostile) + n) for n in range(len(hostile))]
    return [url for pair in zip(hostile, honest, strict=True) for url in pair]


@pytest.mark.parametrize("per_host", [1, 3])
def test_every_framing_attack_gets_its_reason_and_spoils_no_neighbour(hostile_web: HostileWeb, per_host: int) -> None:
    web = hostile_web
    wanted = paired(web, sorted(FRAMING))
    with bounded(GUARD), Fetcher(timeout=TIMEOUT, retries=1, policy=FetchPolicy(per_host=per_host)) as fetcher:
        got = fetch_all(fetcher, wanted, threads=per_host)
    check_outcomes(web, got, retries=1)
    check_attempts(web, wanted, retries=1)
    assert web.main.connections < sum(web.main.requests.values()), "keep-alive should have carried several urls"


def test_a_connection_that_must_close_is_never_asked_again(hostile_web: HostileWeb) -> None:
    """One request at a time on one host: were a POISON connection kept, every honest url after it would be
    answered on it with another image."""
    web = hostile_web
    wanted = paired(web, sorted(POISON) * 3)
    with bounded(GUARD), Fetcher(timeout=TIMEOUT, retries=0, policy=FetchPolicy(per_host=1)) as fetcher:
        got = fetch_all(fetcher, wanted, threads=1)
    check_outcomes(web, got, retries=0)
    # Each POISON answer ends its connection, and the honest url after it opens the next (kept for the next POISON).
    assert web.main.connections == len(POISON) * 3 + 1


def response(head: bytes) -> http_wire.Response:
    """The head's Response as the wire layer frames it, sent over a socket pair once the request has arrived."""
    ours, theirs = socket.socketpair()
    with ours, theirs:
        server = threading.Thread(target=lambda: (theirs.recv(1 << 16), theirs.sendall(head)), daemon=True)
        server.start()
        try:
            return http_wire.Connection(ours).exchange(urls.target("http://127.0.0.1/"), (), lambda: 5.0)
        finally:
            server.join(timeout=5)


@pytest.mark.parametrize(
    ("fields", "framing", "persistent"),
    [
        (b"Content-Length: 12", "length", True),
        (b"Content-Length: 12, 12", "length", True),
        (b"Content-Length: 012", "length", True),
        (b"Transfer-Encoding: chunked", "chunked", True),
        (b"Transfer-Encoding: chunked\r\nContent-Length: 12", "chunked", False),
        (b"Connection: close\r\nContent-Length: 12", "length", False),
        (b"", "close", False),
    ],
)
def test_framing_of_a_well_formed_head(fields: bytes, framing: str, persistent: bool) -> None:
    got = response(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n\r\n")
    assert (got.framing, got.persistent) == (framing, persistent)


@pytest.mark.parametrize(
    "fields",
    [
        b"Content-Length: ",
        b"Content-Length: 12,",
        b"Content-Length: 12\r\nContent-Length: 13",
        b"Content-Length: 1_2",
        b"Content-Length: \xb9\xb2",
        b"Transfer-Encoding: \r\nContent-Length: 12",
        b"Transfer-Encoding: chunked, chunked",
        b"Transfer-Encoding: identity",
    ],
)
def test_an_ambiguous_head_is_broken(fields: bytes) -> None:
    with pytest.raises(http_wire.Broken):
        response(b"HTTP/1.1 200 OK\r\n" + fields + b"\r\n\r\n")


def test_close_beside_keep_alive_closes() -> None:
    got = response(b"HTTP/1.0 200 OK\r\nConnection: keep-alive, close\r\nContent-Length: 0\r\n\r\n")
    assert (got.framing, got.persistent) == ("length", False)


def test_http10_chunked_is_read_but_never_kept() -> None:
    got = response(b"HTTP/1.0 200 OK\r\nConnection: keep-alive\r\nTransfer-Encoding: chunked\r\n\r\n")
    assert (got.framing, got.persistent) == ("chunked", False)


def test_an_answer_sent_before_the_request_is_no_answer() -> None:
    """A response already waiting on a fresh connection when the request goes out answers nothing of ours."""

    ours, theirs = socket.socketpair()
    with ours, theirs:
        theirs.sendall(b"HTTP/1.1 200 OK\r\nContent-Length: 3\r\n\r\nabc")
        with pytest.raises(http_wire.Broken, match="before it was asked"):
            http_wire.Connection(ours).exchange(urls.target("http://127.0.0.1/"), (), lambda: 5.0)


_STATUS = st.sampled_from(
    [
        b"HTTP/1.1 200 OK",
        b"HTTP/1.0 200 OK",
        b"HTTP/1.1 100 Continue\r\n\r\nHTTP/1.1 200 OK",
        b"HTTP/1.1 103 Early Hints\r\nContent-Length: 5\r\n\r\nHTTP/1.1 200 OK",
        b"HTTP/1.1 204 No Content",
        b"HTTP/1.1 304 Not Modified",
        b"HTTP/1.1 101 Switching Protocols",
        b"HTTP/1.1 302 Found",
        b"HTTP/2 200",
        b"HTTP/1.1 2000 OK",
        b"",
    ]
)
_FIELD = st.sampled_from(
    [
        b"Content-Length: 5",
        b"Content-Length: 05",
        b"Content-Length: +5",
        b"Content-Length: ",
        b"Content-Length: 5, 6",
        b"Content-Length: 5, 5",
        b"Content-Length: " + b"9" * 5000,
        b"Content-Length: \xb2",
        b"Transfer-Encoding: chunked",
        b"Transfer-Encoding: Chunked",
        b"Transfer-Encoding: gzip, chunked",
        b"Transfer-Encoding: ",
        b"Connection: close",
        b"Connection: keep-alive",
        b"Content-Encoding: gzip",
        b"Content-Encoding: deflate",
        b"Content-Encoding: br",
        b" folded on",
        b"Bad Name: x",
        b"\xff: y",
        b"X: \xff\x00\r",
    ]
) | st.binary(max_size=30).filter(lambda value: b"\n" not in value).map(lambda value: b"X-Any: " + value)
_BODY = st.sampled_from(
    [
        b"",
        b"hello",
        b"5\r\nhello\r\n0\r\n\r\n",
        b"5;x=y\r\nhello\r\n0\r\nT: v\r\n\r\n",
        b"ffffffffffffffffff\r\n",
        gzip.compress(b"hello"),
    ]
) | st.binary(max_size=80)


@settings(max_examples=500, deadline=None)
@given(status=_STATUS, fields=st.lists(_FIELD, max_size=4), body=_BODY)
def test_any_answer_is_framed_exactly_or_broken_never_an_exception(
    status: bytes, fields: list[bytes], body: bytes
) -> None:
    """Whatever a server sends, the wire layer frames a body, refuses it by name (Broken, Oversize, Unsupported),
    or says the connection is not fit for another request; no other exception, no wait past the server's close.
    The server closes once the client has judged the connection, or after CLOSE_AFTER for a body read to the close."""
    answer = b"\r\n".join([status, *fields]) + b"\r\n\r\n" + body
    judged = threading.Event()
    ours, theirs = socket.socketpair()
    with ours, theirs:

        def serve() -> None:
            theirs.recv(1 << 16)
            theirs.sendall(answer)
            judged.wait(CLOSE_AFTER)
            theirs.shutdown(socket.SHUT_WR)

        server = threading.Thread(target=serve, daemon=True)
        server.start()
        conn = http_wire.Connection(ours)
        try:
            got = conn.exchange(urls.target("http://127.0.0.1/"), (), lambda: 5.0)
            raw = conn.body(got, lambda: 5.0, 1 << 10)
            reusable = conn.finished(got)
            judged.set()
            http_wire.decoded(got, raw, 1 << 10)
        except (http_wire.Broken, http_wire.Oversize, http_wire.Unsupported) as refused:
            event(type(refused).__name__)
            return
        finally:
            judged.set()
            server.join(timeout=5)
    event(f"framed: {got.framing}, {'kept' if reusable else 'closed'}")
    assert got.framing != "length" or len(raw) == got.length
    if reusable:  # kept only when the server said so, framed exactly, with nothing after the body
        assert got.persistent and got.framing in ("length", "chunked", "none") and not conn.buffer
    assert got.framing != "close" or not reusable

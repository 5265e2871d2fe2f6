"""The fetcher against a raw 127.0.0.1 server that lies: framing, deadlines, url strings and X-Robots-Tag."""

from __future__ import annotations

import socket
import threading
import time
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from dew.data.images import urls
from dew.data.images.fetch import BAD_URL, Dropped, Fetcher, FetchPolicy, opted_out

DRIP_SECONDS = 0.8
LIFETIME = 60.0  # the server stops itself after this long, whoever forgets it
REFUSE_AFTER = 0.5  # how long "refuse" works on a request before it answers 429
RETRY_AFTER = 2  # the seconds its 429 asks the whole host to wait


def _response(body: bytes, length: int | None = None, extra: bytes = b"") -> bytes:
    size = len(body) if length is None else length
    return b"HTTP/1.1 200 OK\r\nContent-Type: image/png\r\nContent-Length: %d\r\n\r\n" % size + body + extra


class LyingServer:
    """/<behaviour>/<i> answers body b"image <i>" exactly, with extra bytes past its length, or dripped."""

    def __init__(self) -> None:
        self.listener = socket.create_server(("127.0.0.1", 0))
        self.listener.settimeout(0.1)
        self.stopping = threading.Event()
        self.port = self.listener.getsockname()[1]
        self.log: list[tuple[float, str]] = []  # (when, what): a request's path as it arrived, or "refused"
        self.thread = threading.Thread(target=self._serve, daemon=True)
        self.thread.start()

    def url(self, behaviour: str, i: int) -> str:
        return f"http://127.0.0.1:{self.port}/{behaviour}/{i}"

    def stop(self) -> None:
        self.stopping.set()
        self.thread.join()
        self.listener.close()

    def _serve(self) -> None:
        until = time.monotonic() + LIFETIME
        while not self.stopping.is_set() and time.monotonic() < until:
            try:
                conn, _ = self.listener.accept()
            except TimeoutError:
                continue
            threading.Thread(target=self._connection, args=(conn,), daemon=True).start()

    def _connection(self, conn: socket.socket) -> None:
        conn.settimeout(5)
        buffer = b""
        with conn:
            while not self.stopping.is_set():
                while b"\r\n\r\n" not in buffer:
                    try:
                        data = conn.recv(4096)
                    except OSError:
                        return
                    if not data:
                        return
                    buffer += data
                head, buffer = buffer.split(b"\r\n\r\n", 1)
                behaviour, index = head.split(b" ")[1].decode().strip("/").split("/")[:2]
                body = b"image " + index.encode()
                self.log.append((time.monotonic(), f"/{behaviour}/{index}"))
                try:
                    if behaviour == "refuse":  # a moment's work, then 429: the whole host is to wait RETRY_AFTER s
                        if self.stopping.wait(REFUSE_AFTER):
                            return
                        refusal = b"HTTP/1.1 429 Slow Down\r\nRetry-After: %d\r\nContent-Length: 0\r\n\r\n"
                        conn.sendall(refusal % RETRY_AFTER)
                        self.log.append((time.monotonic(), "refused"))
                    elif behaviour == "overlong":  # its own body, then a whole second answer nobody asked for
                        conn.sendall(_response(body, extra=_response(b"image smuggled")))
                    elif behaviour == "empty_gzip":  # a 200 with nothing in it, its coding named all the same
                        conn.sendall(b"HTTP/1.1 200 OK\r\nContent-Encoding: gzip\r\nContent-Length: 0\r\n\r\n")
                    elif behaviour == "drip":
                        for byte in _response(body):
                            if self.stopping.wait(DRIP_SECONDS):
                                return
                            conn.sendall(bytes([byte]))
                    else:
                        conn.sendall(_response(body))
                except OSError:
                    return


@pytest.fixture
def server() -> Iterator[LyingServer]:
    served = LyingServer()
    try:
        yield served
    finally:
        served.stop()


def test_bytes_past_a_content_length_never_reach_the_next_url(server: LyingServer) -> None:
    with Fetcher(timeout=5.0, retries=0) as fetcher:
        for i in range(6):
            assert fetcher.get(server.url("overlong" if i % 2 else "exact", i)) == b"image %d" % i


def test_an_empty_body_in_a_content_coding_is_no_image_and_asked_once(server: LyingServer) -> None:
    """An empty 200 marked gzip was a body that "ends inside its stream": http_error, asked again and again
    (and refetched by every ingest rerun). Empty is empty, whatever coding it names, as a browser reads it."""
    with Fetcher(timeout=5.0, retries=2) as fetcher, pytest.raises(Dropped, match="no_image: the response is empty"):
        fetcher.get(server.url("empty_gzip", 0))
    assert [what for _, what in server.log] == ["/empty_gzip/0"]


def test_a_dripping_server_is_cut_off_at_the_deadline(server: LyingServer) -> None:
    timeout, retries = 1.0, 1
    started = time.monotonic()
    with Fetcher(timeout=timeout, retries=retries) as fetcher, pytest.raises(Dropped, match="timeout"):
        fetcher.get(server.url("drip", 0))
    # The bound of the contract, timeout × attempts, plus room for a loaded machine; a drip uncut takes minutes.
    assert time.monotonic() - started < timeout * (retries + 1) + 5.0


def test_a_fetch_queued_for_a_hosts_slot_waits_out_the_retry_after_the_host_gave_meanwhile(
    server: LyingServer,
) -> None:
    with Fetcher(timeout=10.0, retries=0, policy=FetchPolicy(per_host=1)) as fetcher, ThreadPoolExecutor(2) as pool:
        refused = pool.submit(fetcher.get, server.url("refuse", 0))
        for _ in range(500):  # until the refused request holds the host's one slot (5 s at most)
            if server.log:
                break
            time.sleep(0.01)
        queued = pool.submit(fetcher.get, server.url("exact", 1))  # waits for the slot while the 429 is made
        with pytest.raises(Dropped, match="http_error"):
            refused.result()
        assert queued.result() == b"image 1"
    when = dict((what, at) for at, what in server.log)
    # The 429 stopped the whole host: a fetch that was waiting for its turn is no exception.
    assert when["/exact/1"] >= when["refused"] + RETRY_AFTER, server.log


@pytest.mark.parametrize(
    "url",
    [
        "http://127.0.0.1:99999/a.jpg",
        "http://[::1/a.jpg",
        "http://[not:an:address]/a.jpg",
        "ftp://127.0.0.1/a.jpg",
        "http://:80/a.jpg",
        "http://exa mple.com/a.jpg",
        "http://127.0.0.1/\udcff.jpg",
        "",
    ],
)
def test_urls_no_browser_would_fetch_are_bad_url(url: str) -> None:
    with Fetcher(timeout=1.0, retries=0) as fetcher, pytest.raises(Dropped) as dropped:
        fetcher.get(url)
    assert dropped.value.reason == BAD_URL


def test_paths_are_percent_encoded_as_a_browser_does() -> None:
    target = urls.target(" http://user:pw@Bücher.example:8080/a b/é\\x.jpg?q=ü x&r='#frag ")
    assert target.host == "xn--bcher-kva.example" and target.port == 8080
    assert target.path == "/a%20b/%C3%A9/x.jpg?q=%C3%BC%20x&r=%27"
    assert urls.target("http://[::1]:81/").authority == "[::1]:81"


@pytest.mark.parametrize(
    ("values", "out"),
    [
        (["noai"], True),
        (["NoImageAI"], True),
        (["noindex , noimageai"], True),
        (["dew-data: noai"], True),
        (["DEW-DATA:noai"], True),
        (["otherbot: noai"], False),
        (["otherbot: noindex, noai"], False),
        (["otherbot: noai", "nofollow"], False),
        (["otherbot: nofollow", "noai"], True),
        (["otherbot: noindex, dew-data: noai"], True),
        (["max-image-preview:large, noai"], True),
        (["max-image-preview: large, max-snippet: 20"], False),
        (["unavailable_after: Friday, 25-Jun-10 15:00:00 PST, noai"], True),
        (["unavailable_after: 25 Jun 2010 15:00:00 PST"], False),
        (["noindex", "nofollow"], False),
        ([], False),
    ],
)
def test_robots_tag_forms_crawlers_meet(values: list[str], out: bool) -> None:
    assert opted_out(values, FetchPolicy()) is out

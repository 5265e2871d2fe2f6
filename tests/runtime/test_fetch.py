"""The url fetch path against a local server: every way a url fails has its one reason, politely."""

from __future__ import annotations

import threading
from collections.abc import Iterator
from concurrent.futures import ThreadPoolExecutor

import pytest

from dew.data.images import pixels
from dew.data.images.fetch import Dropped, FetchClosed, Fetcher, FetchPolicy, fetch_image, opted_out

pytest.importorskip("cv2")
pytest.importorskip("PIL.Image")
pytest.importorskip("skimage.data")

from tests.runtime.online_support import KINDS, MAX_BYTES, ImageServer

RULES = pixels.ImageRules(min_size=128)


@pytest.fixture
def server() -> Iterator[ImageServer]:
    served = ImageServer()
    served.start()
    try:
        yield served
    finally:
        served.stop()


def outcome(fetcher: Fetcher, url: str) -> str | None:
    try:
        fetch_image(fetcher, url, rules=RULES, size=64)
    except Dropped as dropped:
        return dropped.reason
    return None


def url_of(server: ImageServer, kind: str, i: int) -> str:
    return f"{server.base}/redirect/3/{i}.jpg" if kind == "redirect" else server.url(kind, i)


def test_every_kind_of_url_ends_fetched_or_dropped_for_its_one_reason(server: ImageServer) -> None:
    policy = FetchPolicy(max_bytes=MAX_BYTES)
    urls = {url_of(server, kind, i): expected for kind, expected in KINDS.items() for i in range(2)}
    with Fetcher(timeout=2.0, retries=1, policy=policy) as fetcher, ThreadPoolExecutor(16) as pool:
        got = dict(zip(urls, pool.map(lambda url: outcome(fetcher, url), urls), strict=True))
    assert got == urls
    # Retried: the 429 (once, after its Retry-After) and the 500; a 404 is final.
    assert server.requests["/busy/0.jpg"] == 2 and server.requests["/error/0.jpg"] == 2
    assert server.requests["/missing/0.jpg"] == 1
    first, retry = server.arrivals["/busy/1.jpg"]
    assert retry - first >= 1.0, "the retry came before the host's Retry-After: 1 ran out"


def test_a_kept_image_is_the_served_photograph(server: ImageServer) -> None:
    with Fetcher(timeout=5.0) as fetcher:
        image = fetch_image(fetcher, server.url("photo", 1), rules=RULES)
        grey = fetch_image(fetcher, server.url("grey", 0), rules=RULES)
    assert image.shape == (480, 480, 3) and image.dtype == "uint8"
    assert grey.shape == (300, 300, 3) and (grey[..., 0] == grey[..., 2]).all()


def test_one_host_reuses_its_connection(server: ImageServer) -> None:
    with Fetcher(timeout=5.0) as fetcher:
        for i in range(12):
            fetcher.get(server.url("photo", i))
    assert sum(server.requests.values()) == 12 and server.connections == 1


def test_requests_in_flight_to_one_host_never_exceed_the_limit(server: ImageServer) -> None:
    urls = [server.url("slow", i) for i in range(24)]
    with Fetcher(timeout=10.0, policy=FetchPolicy(per_host=3)) as fetcher, ThreadPoolExecutor(24) as pool:
        list(pool.map(fetcher.get, urls))
    assert server.most_in_flight == 3


def test_optout_can_be_ignored_when_the_owner_of_the_images_says_so(server: ImageServer) -> None:
    with Fetcher(timeout=5.0, policy=FetchPolicy(respect_optout=False)) as fetcher:
        assert outcome(fetcher, server.url("noai", 0)) is None


def test_close_ends_fetches_hung_on_a_server_at_once(server: ImageServer) -> None:
    fetcher = Fetcher(timeout=60.0, retries=3)
    raised: list[BaseException] = []

    def fetch(i: int) -> None:
        try:
            fetcher.get(server.url("hang", i))
        except BaseException as error:
            raised.append(error)

    threads = [threading.Thread(target=fetch, args=(i,)) for i in range(4)]
    for thread in threads:
        thread.start()
    while sum(server.requests.values()) < 4 and all(t.is_alive() for t in threads):
        threading.Event().wait(0.02)
    fetcher.close()
    for thread in threads:
        thread.join(timeout=10)
    assert not any(t.is_alive() for t in threads)
    assert len(raised) == 4 and all(isinstance(e, FetchClosed) for e in raised)


@pytest.mark.parametrize(
    ("values", "out"),
    [
        (["noai"], True),
        (["noindex, noimageai"], True),
        (["dew-data: noai"], True),
        (["otherbot: noai"], False),
        (["noindex", "nofollow"], False),
        ([], False),
    ],
)
def test_robots_tag_directives(values: list[str], out: bool) -> None:
    assert opted_out(values, FetchPolicy()) is out


def test_policy_refuses_nonsense() -> None:
    with pytest.raises(ValueError, match="per_host"):
        FetchPolicy(per_host=0)
    with pytest.raises(ValueError, match="timeout"):
        Fetcher(timeout=0)

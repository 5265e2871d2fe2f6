"""The fetcher against the hostile web (tests/hostile_http.py): every url gets the bytes it served or its one
reason, whatever its neighbours on a shared connection do, and no string, however odd, escapes as an exception."""

from __future__ import annotations

import random
from concurrent.futures import ThreadPoolExecutor

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dew.data.images import pixels, urls
from dew.data.images.fetch import BAD_URL, REASONS, Dropped, Fetcher, FetchPolicy

pytest.importorskip("skimage.data")

from tests.hang_guard import bounded
from tests.hostile_http import BEHAVIOURS, IMAGES, HostileWeb, behaviour_of, image, outcomes

TIMEOUT = 1.0  # seconds an attempt has: long enough for a local image on a loaded machine, short for a drip
GUARD = 300.0  # a hang guard, never a speed test


def fetch_all(fetcher: Fetcher, wanted: list[str], threads: int) -> dict[str, bytes | str]:
    """url → the body fetched, or the reason it was dropped for; `threads` fetches at a time."""

    def one(url: str) -> bytes | str:
        try:
            return fetcher.get(url)
        except Dropped as dropped:
            return dropped.reason

    with ThreadPoolExecutor(threads) as pool:
        return dict(zip(wanted, pool.map(one, wanted), strict=True))


def check_outcomes(web: HostileWeb, got: dict[str, bytes | str], retries: int) -> None:
    """Each url's outcome is its behaviour's: the very bytes its own answer framed, or its reason."""
    for url, outcome in got.items():
        want = web.outcome(url, retries)
        if want is None or want in pixels.REASONS:  # a body the fetcher hands on; the pixel rules judge it
            served = web.served(url)
            shown = outcome if isinstance(outcome, str) else f"{len(outcome)} other bytes"
            assert outcome == served, f"{url}: {shown} instead of its own {len(served or b'')} bytes"
        else:
            assert outcome == want, f"{url}: {outcome if isinstance(outcome, str) else 'a body'}, not {want}"


def check_attempts(web: HostileWeb, wanted: list[str], retries: int) -> None:
    """Each url fetched once was asked as often as its behaviour needs, no more: no fetch was made twice."""
    for url in wanted:
        if url not in web.bad_urls():
            behaviour, _ = behaviour_of(url)
            asked = web.main.requests_to(url)
            assert sum(outcomes(behaviour, asked, retries).values()) == 1, (url, asked)


def test_every_url_gets_its_own_bytes_beside_every_lie_on_shared_connections(hostile_web: HostileWeb) -> None:
    web = hostile_web
    hostile = web.every_behaviour(0)
    honest = [web.url("honest", i) for i in range(len(hostile), 2 * len(hostile))]
    # Each hostile url followed by an honest one, so a connection a lie has spoiled would serve the next url.
    wanted = [url for pair in zip(hostile, honest, strict=True) for url in pair]
    wanted += web.odd_urls(2 * len(hostile)) + web.bad_urls()
    with bounded(GUARD), Fetcher(timeout=TIMEOUT, retries=1, policy=FetchPolicy(per_host=3)) as fetcher:
        got = fetch_all(fetcher, wanted, threads=3)
    check_outcomes(web, got, retries=1)
    check_attempts(web, wanted, retries=1)
    asked = sum(web.main.requests.values())
    assert web.main.connections < asked, "keep-alive should have carried several urls on one connection"


@pytest.mark.slow
@settings(max_examples=10, deadline=None, suppress_health_check=[HealthCheck.too_slow])
@given(
    behaviours=st.lists(st.sampled_from(sorted(BEHAVIOURS)), min_size=2, max_size=10),
    per_host=st.integers(2, 5),
    retries=st.sampled_from([0, 1]),
    seed=st.integers(0, 2**16),
)
def test_a_random_mix_of_behaviours_gives_every_url_its_own_outcome(
    behaviours: list[str], per_host: int, retries: int, seed: int
) -> None:
    web = HostileWeb()  # a fresh pair each example: what a url answers may depend on what it was asked before
    try:
        wanted = [web.url(behaviour, i) for i, behaviour in enumerate(behaviours)]
        wanted += [web.url("honest", i) for i in range(len(behaviours), len(behaviours) + 4)]
        random.Random(seed).shuffle(wanted)
        policy = FetchPolicy(per_host=per_host)
        with bounded(GUARD), Fetcher(timeout=TIMEOUT, retries=retries, policy=policy) as fetcher:
            got = fetch_all(fetcher, wanted, threads=per_host + 1)
        check_outcomes(web, got, retries)
        check_attempts(web, wanted, retries)
    finally:
        web.stop()


# Pieces of urls as lists and crawls hold them, well formed or not.
_SCHEMES = st.sampled_from(["http", "HTTP", "https", "hTtP", "ftp", "file", "javascript", "", "ht tp", "http:"])
_SEPARATORS = st.sampled_from(["://", ":/", ":", ":\\\\", ":///", "://\\", " :// "])
_USERINFO = st.sampled_from(["", "user@", "u:p@", "@", "a@b@", "%zz@", "ü@"])
_HOSTS = st.sampled_from(
    [
        "127.0.0.1",
        "LOCALHOST",
        "[::1]",
        "[::1",
        "::1",
        "[fe80::1%25eth0]",
        "[v1.x]",
        "[127.0.0.1]",
        "",
        ".",
        "a..b.invalid",
        "xn--",
        "xn--zz.invalid",
        "bücher.invalid",
        "ex ample.invalid",
        "exa%20mple.invalid",
        "%ff.invalid",
        "\x00.invalid",
        "a" * 70 + ".invalid",
        "☃.invalid",
        "ß.invalid",
        "1.2.3.256",
        "0x7f.1",
        "999999999999",
    ]
) | st.text(max_size=12)
_PORTS = st.sampled_from(["", ":", ":0", ":65536", ":99999", ":-1", ":８０", ":80a", ":1", ": 80"]) | st.integers(
    -10, 70000
).map(lambda n: f":{n}")
_PATHS = st.sampled_from(
    ["", "/", "/honest/1", "/honest/2/ü b", "/%", "/%zz", "/\ud800", "/a\nb", "/../..", "\\honest\\3", "/a\tb"]
) | st.text(max_size=24).map(lambda text: "/" + text)
_TAILS = st.sampled_from(["", "?", "?a=b c", "?ü=\"'<>", "#frag", "?x#y", "#", "?\ud800"])
HOSTILE_URLS = st.builds(
    lambda *parts: "".join(parts), _SCHEMES, _SEPARATORS, _USERINFO, _HOSTS, _PORTS, _PATHS, _TAILS
)


@settings(max_examples=400, deadline=None)
@given(url=st.text() | HOSTILE_URLS)
def test_a_url_string_is_a_target_a_browser_would_send_or_bad_url(url: str) -> None:
    try:
        target = urls.target(url)
    except urls.BadUrl:
        return
    assert target.scheme in ("http", "https") and 0 < target.port <= 65535
    assert target.path.startswith("/") and target.url.isascii() and target.url.isprintable()
    path, _, query = target.path.partition("?")
    # What a browser percent-encodes (WHATWG's path and special-query sets) is, and controls were, encoded.
    assert not set(' "<>`{}#') & set(path) and not set(" \"<>'#") & set(query), target.path
    assert urls.target(target.url) == target  # what goes on the wire reads back as itself


@settings(max_examples=150, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(url=st.text(max_size=40) | HOSTILE_URLS | HOSTILE_URLS.map(lambda u: u.replace("127.0.0.1", "127.0.0.1:PORT")))
def test_any_string_is_fetched_or_dropped_for_a_reason_never_an_exception(hostile_web: HostileWeb, url: str) -> None:
    url = url.replace(":PORT", f":{hostile_web.main.port}")
    own = {image(i) for i in range(IMAGES)}
    with bounded(GUARD), Fetcher(timeout=0.5, retries=0) as fetcher:
        try:
            body = fetcher.get(url)
        except Dropped as dropped:
            assert dropped.reason in REASONS, dropped
            try:
                urls.target(url)
            except urls.BadUrl:
                assert dropped.reason == BAD_URL, dropped  # what the url layer refuses is counted as such
            return
    assert body in own, f"{url!r} fetched {len(body)} bytes that no url of the server serves"

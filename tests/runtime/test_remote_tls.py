"""The lean range client (dew.data.http_ranges) over https, for real: a TLS server on 127.0.0.1 whose
certificate a throwaway CA signed (trustme), found through REQUESTS_CA_BUNDLE as requests would, and the
same server reached through a proxy by CONNECT (https_proxy, NO_PROXY). Reads return the exact bytes;
a certificate that does not verify, and a proxy that refuses the tunnel (407, 403), are each one clear
error, at once, never data and never a retry loop.
"""

from __future__ import annotations

import base64
import json
import ssl
import urllib.parse
from collections.abc import Iterator

import pytest

from dew.data import http_ranges, remote, retries, storage_errors
from tests.runtime.http_support import DATA, ConnectProxy, RangeServer

pytest.importorskip("google.cloud.storage")
trustme = pytest.importorskip("trustme")

URI = "gs://dew-test/object.bin"
FIRST, SECOND = (100, 612), (5000, 5512)
_PROXY_VARIABLES = ("http_proxy", "https_proxy", "all_proxy", "no_proxy")


def server_context(ca, *names: str) -> ssl.SSLContext:
    context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
    ca.issue_cert(*(names or ("127.0.0.1",))).configure_cert(context)
    return context


def bundle(ca, tmp_path, name: str = "ca.pem") -> str:
    path = tmp_path / name
    ca.cert_pem.write_to_path(str(path))
    return str(path)


@pytest.fixture
def environment(monkeypatch) -> Iterator[pytest.MonkeyPatch]:
    """No proxy, CA bundle or session of the machine's own: each test says the ones it reads under."""
    for name in _PROXY_VARIABLES:
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)
    for name in ("REQUESTS_CA_BUNDLE", "CURL_CA_BUNDLE"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    monkeypatch.setattr(remote, "_SESSION", None)
    yield monkeypatch
    monkeypatch.setattr(remote, "_SESSION", None)


@pytest.fixture
def ca():
    return trustme.CA()


@pytest.fixture
def server(ca, environment) -> Iterator[RangeServer]:
    served = RangeServer(context=server_context(ca))
    environment.setenv("STORAGE_EMULATOR_HOST", served.url)
    yield served
    served.stop()


def read(lo: int, hi: int) -> bytes:
    target = http_ranges.target(URI, None)
    return bytes(retries.retrying(URI, lambda: remote.get_range(URI, target, lo, hi)))


def test_https_reads_are_exact_on_one_kept_alive_connection(server, environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    assert read(*FIRST) == DATA[slice(*FIRST)]
    assert read(*SECOND) == DATA[slice(*SECOND)]
    assert read(0, len(DATA)) == DATA
    assert server.connections == 1, "a TLS connection was not pooled and used again"
    assert all(r["request-line"].startswith("GET /download/storage/v1/b/") for r in server.requests)


def test_curl_ca_bundle_is_read_when_requests_ca_bundle_is_not(server, environment, ca, tmp_path) -> None:
    environment.setenv("CURL_CA_BUNDLE", bundle(ca, tmp_path))
    assert read(*FIRST) == DATA[slice(*FIRST)]


@pytest.mark.parametrize("trust", ["certifi", "another CA", "another name"])
def test_a_certificate_that_does_not_verify_is_one_clear_error(trust, ca, environment, tmp_path) -> None:
    names = ("storage.example",) if trust == "another name" else ("127.0.0.1",)
    served = RangeServer(context=server_context(ca, *names))
    environment.setenv("STORAGE_EMULATOR_HOST", served.url)
    if trust == "another CA":
        environment.setenv("REQUESTS_CA_BUNDLE", bundle(trustme.CA(), tmp_path, "other.pem"))
    elif trust == "another name":
        environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    try:
        with pytest.raises(OSError, match="certificate") as raised:
            read(*FIRST)
        assert "REQUESTS_CA_BUNDLE" in str(raised.value) and URI in str(raised.value)
        # Raised by the first attempt itself, not by _retrying once its budget ran out.
        assert isinstance(raised.value.__cause__, ssl.SSLCertVerificationError)
        assert "attempts" not in str(raised.value), "a certificate that failed was tried again"
        assert served.requests == [], "a request was sent on a connection whose certificate failed"
    finally:
        served.stop()


def test_an_unreadable_ca_bundle_is_named(server, environment, tmp_path) -> None:
    (tmp_path / "empty.pem").write_text("no certificate here\n")
    for path in (tmp_path / "missing.pem", tmp_path / "empty.pem"):
        environment.setenv("REQUESTS_CA_BUNDLE", str(path))
        environment.setattr(remote, "_SESSION", None)
        with pytest.raises(OSError, match=f"the CA bundle {path} .*unreadable"):
            read(*FIRST)
    assert server.requests == []


def test_https_through_a_proxy_goes_by_connect(server, environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    proxy = ConnectProxy()
    host, port = proxy.url.removeprefix("http://").split(":")
    environment.setenv("https_proxy", f"http://dew%20user:p%40ss@{host}:{port}")
    try:
        assert read(*FIRST) == DATA[slice(*FIRST)]
        assert read(*SECOND) == DATA[slice(*SECOND)]
        assert [head[0] for head in proxy.connects] == [f"CONNECT 127.0.0.1:{server.port} HTTP/1.0"]
        credentials = base64.b64encode(b"dew user:p@ss").decode()
        assert f"Proxy-Authorization: Basic {credentials}" in proxy.connects[0][1:]
        assert server.connections == 1
        # The origin saw the request as a direct one: no absolute URI, no proxy credentials.
        assert all(r["request-line"].startswith("GET /") and "proxy-authorization" not in r for r in server.requests)
    finally:
        proxy.stop()


def test_no_proxy_bypasses_the_proxy_for_https(server, environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    proxy = ConnectProxy()
    environment.setenv("https_proxy", proxy.url)
    environment.setenv("no_proxy", "127.0.0.1")
    try:
        assert read(*FIRST) == DATA[slice(*FIRST)]
        assert proxy.connects == []
        assert server.connections == 1
    finally:
        proxy.stop()


def _through(environment: pytest.MonkeyPatch, proxy: ConnectProxy, credentials: str = "") -> str:
    where = proxy.url.removeprefix("http://")
    environment.setenv("https_proxy", f"http://{credentials}{where}")
    return where


@pytest.mark.parametrize("path", ["range", "whole"])
@pytest.mark.parametrize(
    ("refusal", "credentials", "fix"),
    [
        (
            "407 Proxy Authentication Required",
            "",
            "asks for credentials: put them in the proxy URL, https_proxy=http://USER:PASSWORD@",
        ),
        ("407 Proxy Authentication Required", "dew:wrong@", "refused the user and password in the proxy URL"),
        ("403 Forbidden", "", "does not let this host through to 127.0.0.1"),
    ],
)
def test_a_proxy_that_refuses_the_tunnel_is_one_clear_error_at_once(
    server, environment, ca, tmp_path, path, refusal, credentials, fix
) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    proxy = ConnectProxy(refuse=refusal)
    where = _through(environment, proxy, credentials)
    try:
        with pytest.raises(storage_errors.ProxyRefused, match=fix) as raised:
            if path == "range":  # dew.data.http_ranges
                read(*FIRST)
            else:  # a small object read whole (meta.json), by requests
                remote.read_bytes(URI)
        message = str(raised.value)
        said = f"{URI}: the proxy {where} refused to open a tunnel to 127.0.0.1:{server.port} (HTTP {refusal})"
        assert message.startswith(said)
        # Raised by the first attempt itself, not by _retrying once its budget ran out.
        assert "attempts" not in message and len(proxy.connects) == 1, "a refused tunnel was asked for again"
        assert "wrong" not in message, "the proxy's password is shown"
        assert server.requests == []
    finally:
        proxy.stop()


LISTED = "gs://dew-test/corpus"
LOOKUPS = {  # each way dew lists or stats gs:// paths, and the URI its error names
    "list_names": (LISTED, lambda: remote.list_names(LISTED)),
    "exists": (URI, lambda: remote.exists(URI)),
    "find": (LISTED, lambda: remote.find(LISTED)),
}


@pytest.mark.parametrize("lookup", sorted(LOOKUPS))
@pytest.mark.parametrize(
    ("refusal", "credentials", "fix"),
    [
        ("407 Proxy Authentication Required", "", "asks for credentials: put them in the proxy URL"),
        ("403 Forbidden", "", "does not let this host through to 127.0.0.1"),
    ],
)
def test_a_listing_through_a_proxy_that_refuses_the_tunnel_is_the_same_error_at_once(
    server, environment, ca, tmp_path, lookup, refusal, credentials, fix
) -> None:
    """Listing and existence checks go by the same client as reads, so by the same proxy and the same
    answer to a refusal: one CONNECT, not a library's own retries (gcsfs's took minutes, and it did not
    read https_proxy at all, so behind a proxy it never reached the bucket)."""
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    proxy = ConnectProxy(refuse=refusal)
    where = _through(environment, proxy, credentials)
    uri, call = LOOKUPS[lookup]
    try:
        with pytest.raises(storage_errors.ProxyRefused, match=fix) as raised:
            call()
        message = str(raised.value)
        assert message.startswith(f"{uri}: the proxy {where} refused to open a tunnel to 127.0.0.1:{server.port}")
        assert "attempts" not in message and len(proxy.connects) == 1, "a refused tunnel was asked for again"
        assert server.requests == []
    finally:
        proxy.stop()


def listing_server(ca, pages: list[dict]) -> RangeServer:
    """An https server that answers its i-th listing request with pages[i] (JSON), and 404 to any other."""

    def path(request: dict[str, str]) -> str:
        return urllib.parse.urlsplit(request["request-line"].split()[1]).path

    def answer(head: dict[str, str], lo: int, hi: int) -> list[bytes]:
        if not path(head).endswith("/o"):
            return [b"HTTP/1.1 404 Not Found\r\nContent-Length: 0\r\n\r\n"]
        listed = sum(path(r).endswith("/o") for r in served.requests)
        body = json.dumps(pages[listed - 1]).encode()
        return [b"HTTP/1.1 200 OK\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]

    served = RangeServer(answer, context=server_context(ca))
    return served


def test_a_listing_goes_through_the_proxy_and_reads_every_page(environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    pages = [
        {"items": [{"name": "corpus/"}, {"name": "corpus/a.bin"}], "prefixes": ["corpus/sub/"], "nextPageToken": "p2"},
        {"items": [{"name": "corpus/meta.json"}]},
    ]
    served = listing_server(ca, pages)
    environment.setenv("STORAGE_EMULATOR_HOST", served.url)
    proxy = ConnectProxy()
    _through(environment, proxy)
    try:
        assert remote.list_names(LISTED) == ["a.bin", "meta.json", "sub"]  # the folder's own placeholder left out
        asked = [urllib.parse.urlsplit(r["request-line"].split()[1]) for r in served.requests]
        assert [a.path for a in asked] == ["/storage/v1/b/dew-test/o"] * 2
        queries = [urllib.parse.parse_qs(a.query) for a in asked]
        assert [(q["prefix"], q["delimiter"], q.get("pageToken")) for q in queries] == [
            (["corpus/"], ["/"], None),
            (["corpus/"], ["/"], ["p2"]),
        ]
        assert len(proxy.connects) == 1 and served.connections == 1
    finally:
        proxy.stop()
        served.stop()


def test_a_missing_object_exists_as_a_prefix_that_holds_one(environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    served = listing_server(ca, [{"items": [{"name": "corpus/a.bin"}]}, {}, {}])
    environment.setenv("STORAGE_EMULATOR_HOST", served.url)
    try:
        assert remote.exists(LISTED)  # a directory: no object of its name, one under it
        assert not remote.exists(LISTED)  # nothing under it either
        with pytest.raises(FileNotFoundError, match=LISTED):
            remote.list_names(LISTED)
    finally:
        served.stop()


def test_a_proxy_that_fails_the_tunnel_for_now_is_retried(server, environment, ca, tmp_path) -> None:
    environment.setenv("REQUESTS_CA_BUNDLE", bundle(ca, tmp_path))
    proxy = ConnectProxy(refuse="503 Service Unavailable", times=1)
    _through(environment, proxy)
    try:
        assert read(*FIRST) == DATA[slice(*FIRST)]
        assert len(proxy.connects) == 2 and server.connections == 1
    finally:
        proxy.stop()

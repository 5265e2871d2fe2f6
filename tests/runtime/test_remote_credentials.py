"""The lean range client's credentials (dew.data.http_ranges), against a server on 127.0.0.1 that checks
the token: a 401 refreshes the token once and asks again, a server that keeps answering 401 is one
clear error after that one refresh (never a loop), and expired credentials are refreshed before the
request is sent; a refresh that itself fails is one clear error at once, by either client. The
credentials are a small real google.auth Credentials, the interface the client is handed by
remote._session (AuthorizedSession.credentials), whose refresh() mints the next token.
"""

from __future__ import annotations

import concurrent.futures
import datetime
import os
import threading
from collections.abc import Iterator
from typing import Any

import pytest

from dew.data import http_ranges, remote, retries, storage_errors
from tests.runtime.http_support import DATA, RangeServer, partial

google_credentials = pytest.importorskip("google.auth.credentials")
google_exceptions = pytest.importorskip("google.auth.exceptions")

URI = "gs://dew-test/object.bin"
RANGE = (100, 612)


class Tokens(google_credentials.Credentials):
    """Credentials whose refresh() gives token "t1", then "t2", ..., each valid for an hour."""

    def __init__(self, token: str | None = None, expiry: datetime.datetime | None = None) -> None:
        super().__init__()
        self.token, self.expiry, self.refreshes = token, expiry, 0

    def refresh(self, request) -> None:
        assert callable(request), "refresh() is handed a google.auth transport Request"
        self.refreshes += 1
        self.token = f"t{self.refreshes}"
        self.expiry = _now() + datetime.timedelta(hours=1)


def _now() -> datetime.datetime:
    return datetime.datetime.now(datetime.UTC).replace(tzinfo=None)  # google.auth's naive UTC


def accepting(*tokens: str):
    """An answer that serves the range to a request bearing one of `tokens`, and 401 to any other."""

    def answer(head: dict[str, str], lo: int, hi: int) -> list[bytes]:
        if head.get("authorization") in {f"Bearer {t}" for t in tokens}:
            return [partial(lo, hi)]
        body = b'{"error": {"code": 401, "message": "Invalid Credentials"}}'
        return [b"HTTP/1.1 401 Unauthorized\r\nContent-Length: %d\r\n\r\n%s" % (len(body), body)]

    return answer


@pytest.fixture
def no_proxy(monkeypatch) -> None:
    for name in ("http_proxy", "https_proxy", "all_proxy", "no_proxy"):
        monkeypatch.delenv(name, raising=False)
        monkeypatch.delenv(name.upper(), raising=False)


@pytest.fixture
def serve(no_proxy) -> Iterator:
    servers: list[RangeServer] = []

    def start(*tokens: str) -> RangeServer:
        servers.append(RangeServer(accepting(*tokens)))
        return servers[-1]

    yield start
    for server in servers:
        server.stop()


def read(server: RangeServer, credentials: Tokens) -> bytes:
    client = http_ranges.Client(server.url, credentials)
    return bytes(client.get(URI, http_ranges.target(URI, None), *RANGE))


def bearers(server: RangeServer) -> list[str | None]:
    return [request.get("authorization") for request in server.requests]


def test_a_401_refreshes_the_token_once_and_the_read_succeeds(serve) -> None:
    server, credentials = serve("t1"), Tokens("stale")  # no expiry: valid, as far as it knows
    assert read(server, credentials) == DATA[slice(*RANGE)]
    assert credentials.refreshes == 1
    assert bearers(server) == ["Bearer stale", "Bearer t1"]


def test_a_server_that_keeps_answering_401_is_one_error_after_one_refresh(serve) -> None:
    server, credentials = serve(), Tokens("stale")
    with pytest.raises(OSError, match=f"{URI}: HTTP 401 .*Invalid Credentials"):
        read(server, credentials)
    assert credentials.refreshes == 1, "the token was refreshed more than once for one read"
    assert bearers(server) == ["Bearer stale", "Bearer t1"]


def test_expired_credentials_are_refreshed_before_the_request(serve) -> None:
    server = serve("t1")
    credentials = Tokens("old", expiry=_now() - datetime.timedelta(minutes=1))
    assert read(server, credentials) == DATA[slice(*RANGE)]
    assert credentials.refreshes == 1
    assert bearers(server) == ["Bearer t1"], "an expired token was sent"


def test_credentials_with_no_token_yet_are_refreshed_first(serve) -> None:
    server, credentials = serve("t1"), Tokens()
    assert read(server, credentials) == DATA[slice(*RANGE)]
    assert bearers(server) == ["Bearer t1"]


def test_a_token_that_expires_between_reads_is_refreshed_and_the_connection_kept(serve) -> None:
    server, credentials = serve("t1", "t2"), Tokens()
    client = http_ranges.Client(server.url, credentials)
    target = http_ranges.target(URI, None)
    assert bytes(client.get(URI, target, *RANGE)) == DATA[slice(*RANGE)]
    credentials.expiry = _now() - datetime.timedelta(seconds=1)
    assert bytes(client.get(URI, target, *RANGE)) == DATA[slice(*RANGE)]
    assert credentials.refreshes == 2
    assert bearers(server) == ["Bearer t1", "Bearer t2"]
    assert server.connections == 1


def test_reads_that_meet_a_401_together_refresh_the_token_once(serve) -> None:
    """Many range requests are in flight at once (dew.data.ranges): when the token they all bore is
    refused, one refresh serves them all, not one a request (each a call to the token endpoint)."""
    readers = 8
    together = threading.Barrier(readers, timeout=10)
    refused = accepting("t1")

    def answer(head: dict[str, str], lo: int, hi: int) -> list[bytes]:
        if head.get("authorization") == "Bearer stale":
            together.wait()  # every reader's request was sent with the old token before any is answered
        return refused(head, lo, hi)

    server = RangeServer(answer)
    credentials = Tokens("stale")
    client = http_ranges.Client(server.url, credentials)
    target = http_ranges.target(URI, None)
    try:
        with concurrent.futures.ThreadPoolExecutor(readers) as pool:
            got = list(pool.map(lambda _: bytes(client.get(URI, target, *RANGE)), range(readers)))
    finally:
        server.stop()
    assert got == [DATA[slice(*RANGE)]] * readers
    assert credentials.refreshes == 1, "each reader refused refreshed the token again"
    assert sorted(bearers(server)) == ["Bearer stale"] * readers + ["Bearer t1"] * readers


class Revoked(Tokens):
    """Credentials whose refresh fails, as google.auth's does for a revoked grant or a deleted account."""

    def refresh(self, request) -> None:
        self.refreshes += 1
        raise google_exceptions.RefreshError("invalid_grant: Token has been expired or revoked.")


@pytest.mark.parametrize("when", ["expired", "refused by a 401"])
def test_a_refresh_that_fails_is_one_clear_error_at_once(serve, monkeypatch, when) -> None:
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    server = serve("t1")
    expired = when == "expired"
    credentials = Revoked("old", expiry=_now() - datetime.timedelta(minutes=1)) if expired else Revoked("stale")
    client = http_ranges.Client(server.url, credentials)
    target = http_ranges.target(URI, None)
    with pytest.raises(storage_errors.CredentialsFailed, match="could not be refreshed: invalid_grant") as raised:
        retries.retrying(URI, lambda: client.get(URI, target, *RANGE))
    message = str(raised.value)
    assert (
        message.startswith(f"{URI}: the Google credentials ({__name__}.Revoked) for reading gs://")
        and "gcloud auth application-default login" in message
    )
    assert isinstance(raised.value.__cause__, google_exceptions.RefreshError)
    assert "attempts" not in message and credentials.refreshes == 1, "a failed refresh was tried again"
    assert bearers(server) == ([] if expired else ["Bearer stale"]), "an expired token was sent"


def revoked_session(serve, monkeypatch) -> tuple[Any, Revoked]:
    """remote's own AuthorizedSession (the one meta.json reads and listings use) holding credentials whose
    refresh fails, in front of a server that must see no request; returns the server and the credentials."""
    import google.auth.transport.requests

    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    server = serve("t1")
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", server.url)
    credentials = Revoked()
    session = google.auth.transport.requests.AuthorizedSession(credentials)
    monkeypatch.setattr(remote, "_SESSION", ((os.getpid(), remote._endpoint()), session))
    return server, credentials


def test_a_refresh_that_fails_in_the_requests_session_is_the_same_error(serve, monkeypatch) -> None:
    """Small objects (meta.json) are read by remote's AuthorizedSession, which refreshes on its own."""
    server, credentials = revoked_session(serve, monkeypatch)
    with pytest.raises(
        storage_errors.CredentialsFailed, match=f"{URI}: the Google credentials .*Revoked.* invalid_grant"
    ):
        remote.read_bytes(URI)
    assert credentials.refreshes == 1 and server.requests == []


@pytest.mark.parametrize(
    "lookup",
    [
        lambda: remote.list_names("gs://dew-test/corpus"),
        lambda: remote.exists("gs://dew-test/corpus"),
        lambda: remote.find("gs://dew-test/corpus"),
    ],
    ids=["list_names", "exists", "find"],
)
def test_a_refresh_that_fails_for_a_listing_is_the_same_error_at_once(serve, monkeypatch, lookup) -> None:
    """Listing and existence checks use the reads' session and credentials: a failed refresh is said at
    the first attempt, as for a read, not retried by a library of its own (nor swapped for anonymous access)."""
    server, credentials = revoked_session(serve, monkeypatch)
    with pytest.raises(
        storage_errors.CredentialsFailed,
        match=r"gs://dew-test/corpus: the Google credentials .*Revoked.* invalid_grant",
    ) as raised:
        lookup()
    assert "attempts" not in str(raised.value)
    assert credentials.refreshes == 1 and server.requests == []

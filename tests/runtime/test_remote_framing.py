"""A range answer that carries more bytes than asked never hands a later read on the same pool the wrong
bytes: the lean client (dew.data.http_ranges) closes such a connection instead of pooling it.

The server here (tests/runtime/http_support) is a few lines of sockets on 127.0.0.1, over plain TCP and
over TLS, so that it can break HTTP framing as no real server library would: after the body of the first
answer it sends a whole forged answer to the range the test asks next. A client that reused that
connection would read the forgery as its own answer.
"""

from __future__ import annotations

import contextlib
import json
import os
import socket
import ssl
import threading
import time
from collections.abc import Iterator
from typing import Literal

import pytest

from dew.data import http_ranges, remote, retries
from tests.hang_guard import bounded
from tests.runtime import http_support
from tests.runtime.http_support import DATA, RangeServer, partial

pytest.importorskip("google.cloud.storage")

URI = "gs://dew-test/object.bin"
FIRST, SECOND = (100, 612), (5000, 5512)
Mode = Literal["same write", "later write", "longer length"]


class _Breaker:
    """An answer to range GETs of DATA whose first answer breaks its framing as `mode` says."""

    def __init__(self, mode: Mode) -> None:
        self.mode, self.broke = mode, threading.Event()

    def __call__(self, head: dict[str, str], lo: int, hi: int) -> list[bytes]:
        if self.broke.is_set():
            return [partial(lo, hi)]
        self.broke.set()
        forged = partial(*SECOND, body=b"X" * (SECOND[1] - SECOND[0]))
        if self.mode == "same write":
            return [partial(lo, hi) + forged]
        if self.mode == "later write":
            return [partial(lo, hi), forged]
        # a Content-Length longer than the range, the forgery inside the body it promises
        return [partial(lo, hi, body=DATA[lo:hi] + forged, length=hi - lo + len(forged))]


@pytest.fixture(params=[(m, s) for s in ("http", "https") for m in ("same write", "later write", "longer length")])
def server(request, monkeypatch, tmp_path) -> Iterator[RangeServer]:
    mode, scheme = request.param
    context = None
    if scheme == "https":  # the TLS layer buffers records of its own: framing must hold over it too
        trustme = pytest.importorskip("trustme")
        ca = trustme.CA()
        context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        ca.issue_cert("127.0.0.1").configure_cert(context)
        ca.cert_pem.write_to_path(str(tmp_path / "ca.pem"))
        monkeypatch.setenv("REQUESTS_CA_BUNDLE", str(tmp_path / "ca.pem"))
    served = RangeServer(_Breaker(mode), context)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", served.url)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    for name in ("HTTP_PROXY", "http_proxy", "HTTPS_PROXY", "https_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(remote, "_SESSION", None)
    try:
        yield served
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)


def _read(lo: int, hi: int) -> bytes:
    target = http_ranges.target(URI, None)
    return bytes(retries.retrying(URI, lambda: remote.get_range(URI, target, lo, hi)))


def test_bytes_past_a_range_answer_never_reach_the_next_read_on_the_pool(server) -> None:
    assert _read(*FIRST) == DATA[slice(*FIRST)]
    assert server.written.wait(10)  # the forged answer was sent before the next read is asked
    assert _read(*SECOND) == DATA[slice(*SECOND)]
    assert server.connections >= 2, "the connection that carried the extra bytes was not used again"


def test_a_range_answer_names_the_range_it_holds(monkeypatch) -> None:
    """An answer framed right but for another range (Content-Range) is not taken for the one asked."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    answers = [partial(*SECOND), partial(*FIRST)]  # the wrong range first, then the right one

    def serve() -> None:
        with contextlib.suppress(OSError):
            while answers:
                connection, _ = listener.accept()
                with connection:
                    connection.settimeout(10)
                    asked = b""
                    while b"\r\n\r\n" not in asked:
                        chunk = connection.recv(4096)
                        if not chunk:
                            break  # dew.data.reach's probe: a connection that asks nothing
                        asked += chunk
                    else:
                        connection.sendall(answers.pop(0))

    threading.Thread(target=serve, daemon=True).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", f"http://127.0.0.1:{listener.getsockname()[1]}")
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    monkeypatch.setattr(remote, "_SESSION", None)
    try:
        assert _read(*FIRST) == DATA[slice(*FIRST)]
        assert not answers, "the wrong range was refused and asked again"
    finally:
        listener.close()
        monkeypatch.setattr(remote, "_SESSION", None)


def _whole(head: dict[str, str], lo: int, hi: int) -> list[bytes]:
    """A server that ignores Range and answers every GET with the whole object."""
    return [f"HTTP/1.1 200 OK\r\nContent-Length: {len(DATA)}\r\n\r\n".encode() + DATA]


def _plain_server(monkeypatch, answer) -> RangeServer:
    served = RangeServer(answer)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", served.url)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(remote, "_SESSION", None)
    return served


def test_a_whole_object_answer_is_taken_only_for_a_range_that_is_the_whole_object(monkeypatch) -> None:
    served = _plain_server(monkeypatch, _whole)
    try:
        assert _read(0, len(DATA)) == DATA
        with pytest.raises(OSError, match=r"bytes 100-611, the server answered the whole object \(HTTP 200\)"):
            _read(*FIRST)
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)


def test_pooled_connections_are_checked_past_descriptor_1023(monkeypatch) -> None:
    """select() cannot watch a descriptor above 1023, and a trainer holds many files open: a pooled
    connection's check for stray bytes must work there too."""
    served = _plain_server(monkeypatch, http_support.honest)
    held = []
    try:
        with open(os.devnull, "rb") as devnull:
            while devnull.fileno() + len(held) < 1100:
                held.append(os.dup(devnull.fileno()))
        assert _read(*FIRST) == DATA[slice(*FIRST)]
        assert _read(*SECOND) == DATA[slice(*SECOND)]  # on the pooled connection, above 1023
        assert served.connections == 1
    finally:
        for descriptor in held:
            os.close(descriptor)
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)


def _drip(head: dict[str, str], lo: int, hi: int) -> Iterator[bytes]:
    """A 206 whose body comes a byte at a time, 0.2 s apart: never a stall of the 60 s a byte may take."""
    answer = partial(lo, hi)
    yield answer[: len(answer) - (hi - lo)]  # the head
    for at in range(lo, hi):
        time.sleep(0.2)
        yield DATA[at : at + 1]


def test_a_body_dripped_a_byte_at_a_time_fails_within_the_retry_budget(monkeypatch) -> None:
    """A server that keeps a range's body coming, too slowly ever to finish it, cannot hold the read past
    DEW_GCS_RETRY_SECONDS: the read fails naming the object, not 512 bytes x 0.2 s later (or never)."""
    served = _plain_server(monkeypatch, _drip)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "1")
    try:
        with bounded(60), pytest.raises(OSError, match=rf"{URI}: still failing .* within 1 s .*bytes came within"):
            _read(*FIRST)
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)


def _dripped_metadata(part: str) -> http_support.Answer:
    """A server whose answers to an object's metadata (`part` "stat") or its bytes ("media") come a byte
    every 0.05 s: 420 bytes, about 21 s, the rest answered at once."""
    media = bytes(range(256)) + b"x" * 164

    def answer(head: dict[str, str], lo: int, hi: int) -> Iterator[bytes]:
        is_media = "alt=media" in head["request-line"]
        body = media if is_media else json.dumps({"size": str(len(media)), "generation": "7"}).ljust(420).encode()
        kind = "application/octet-stream" if is_media else "application/json"
        yield f"HTTP/1.1 200 OK\r\nContent-Type: {kind}\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        if part != ("media" if is_media else "stat"):
            yield body
            return
        for at in range(len(body)):
            time.sleep(0.05)
            yield body[at : at + 1]

    return answer


@pytest.mark.parametrize("part", ["stat", "media"])
def test_an_object_read_whole_fails_within_the_retry_budget_when_dripped(monkeypatch, part: str) -> None:
    """meta.json and whole shards come through requests, whose timeout counts silence, not progress: a
    server dripping a byte every 0.05 s held the read until its answer was done (21 s here, never for a
    large one). Now the read ends with DEW_GCS_RETRY_SECONDS, naming the object."""
    served = _plain_server(monkeypatch, _dripped_metadata(part))
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "1")
    try:
        with bounded(60), pytest.raises(OSError, match=rf"{URI}: still failing .*budget ran out"):
            remote.read_bytes(URI)
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    served = _plain_server(monkeypatch, _dripped_metadata("neither"))
    try:
        assert remote.read_bytes(URI) == bytes(range(256)) + b"x" * 164  # the same server, answering at once
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)


def _stalled_media(head: dict[str, str], lo: int, hi: int) -> Iterator[bytes]:
    """An object's metadata at once; its bytes half sent, then nothing for 50 s (a socket waits 60), then
    the rest."""
    media = bytes(range(256)) * 4
    if "alt=media" not in head["request-line"]:
        body = json.dumps({"size": str(len(media)), "generation": "7"}).encode()
        yield f"HTTP/1.1 200 OK\r\nContent-Type: application/json\r\nContent-Length: {len(body)}\r\n\r\n".encode()
        yield body
        return
    yield f"HTTP/1.1 200 OK\r\nContent-Type: application/octet-stream\r\nContent-Length: {len(media)}\r\n\r\n".encode()
    yield media[:512]
    time.sleep(50)
    yield media[512:]


def test_an_object_read_whole_fails_within_the_retry_budget_when_its_body_stalls(monkeypatch) -> None:
    """A body that stops for less than a socket's 60 s wait held the read for the whole stall, whatever was
    left of DEW_GCS_RETRY_SECONDS (here 1 s): the read failed only 50 s later, past this test's hang guard.
    Each wait for the body is now cut to the budget left, so the read fails within it, naming the object."""
    served = _plain_server(monkeypatch, _stalled_media)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "1")
    try:
        with bounded(30), pytest.raises(OSError, match=rf"{URI}: still failing .*within 1 s"):
            remote.read_bytes(URI)
    finally:
        served.stop()
        monkeypatch.setattr(remote, "_SESSION", None)

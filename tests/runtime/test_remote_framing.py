"""A range answer that carries more bytes than asked never hands a later read on the same pool the wrong
bytes: the lean client (dew.data.http_ranges) closes such a connection instead of pooling it.

The server here is a few lines of sockets on 127.0.0.1, so that it can break HTTP framing as no real
server library would: after the body of the first answer it sends a whole forged answer to the range
the test asks next. A client that reused that connection would read the forgery as its own answer.
"""

from __future__ import annotations

import contextlib
import socket
import threading
from collections.abc import Iterator
from typing import Literal

import pytest

from dew.data import http_ranges, remote

pytest.importorskip("google.cloud.storage")

DATA = bytes(range(256)) * 64
URI = "gs://dew-test/object.bin"
FIRST, SECOND = (100, 612), (5000, 5512)
Mode = Literal["same write", "later write", "longer length"]


def _answer(lo: int, hi: int, body: bytes | None = None, length: int | None = None) -> bytes:
    body = DATA[lo:hi] if body is None else body
    head = (
        f"HTTP/1.1 206 Partial Content\r\nContent-Length: {len(body) if length is None else length}\r\n"
        f"Content-Range: bytes {lo}-{hi - 1}/{len(DATA)}\r\n\r\n"
    )
    return head.encode() + body


class _Server:
    """Answers range GETs of DATA, keeping connections alive; the first answer breaks its framing as `mode` says."""

    def __init__(self, mode: Mode) -> None:
        self.mode, self.connections, self.broke = mode, 0, threading.Event()
        self._listener = socket.create_server(("127.0.0.1", 0))
        self._listener.settimeout(10)
        self.url = f"http://127.0.0.1:{self._listener.getsockname()[1]}"
        threading.Thread(target=self._accept, daemon=True).start()

    def _accept(self) -> None:
        with contextlib.suppress(OSError):
            while True:
                connection, _ = self._listener.accept()
                self.connections += 1
                threading.Thread(target=self._serve, args=(connection,), daemon=True).start()

    def _serve(self, connection: socket.socket) -> None:
        connection.settimeout(10)
        with connection, contextlib.suppress(OSError):
            data = b""
            while True:
                while b"\r\n\r\n" not in data:
                    chunk = connection.recv(4096)
                    if not chunk:
                        return
                    data += chunk
                head, _, data = data.partition(b"\r\n\r\n")
                asked = next(line for line in head.split(b"\r\n") if line.lower().startswith(b"range:"))
                lo, hi = (int(x) for x in asked.split(b"=")[1].split(b"-"))
                self._send(connection, lo, hi + 1)

    def _send(self, connection: socket.socket, lo: int, hi: int) -> None:
        if self.broke.is_set():
            connection.sendall(_answer(lo, hi))
            return
        forged = _answer(*SECOND, body=b"X" * (SECOND[1] - SECOND[0]))
        if self.mode == "same write":
            connection.sendall(_answer(lo, hi) + forged)
        elif self.mode == "later write":
            connection.sendall(_answer(lo, hi))
            connection.sendall(forged)
        else:  # a Content-Length longer than the range, the forgery inside the body it promises
            connection.sendall(_answer(lo, hi, body=DATA[lo:hi] + forged, length=hi - lo + len(forged)))
        self.broke.set()

    def close(self) -> None:
        self._listener.close()


@pytest.fixture(params=["same write", "later write", "longer length"])
def server(request, monkeypatch) -> Iterator[_Server]:
    served = _Server(request.param)
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", served.url)
    monkeypatch.setenv("DEW_GCS_RETRY_SECONDS", "20")
    for name in ("HTTP_PROXY", "http_proxy", "ALL_PROXY", "all_proxy"):
        monkeypatch.delenv(name, raising=False)
    monkeypatch.setattr(remote, "_SESSION", None)
    try:
        yield served
    finally:
        served.close()
        monkeypatch.setattr(remote, "_SESSION", None)


def _read(lo: int, hi: int) -> bytes:
    target = http_ranges.target(URI, None)
    return bytes(remote._retrying(URI, lambda: remote.get_range(URI, target, lo, hi)))


def test_bytes_past_a_range_answer_never_reach_the_next_read_on_the_pool(server) -> None:
    assert _read(*FIRST) == DATA[slice(*FIRST)]
    assert server.broke.wait(10)  # the forged answer was sent before the next read is asked
    assert _read(*SECOND) == DATA[slice(*SECOND)]
    assert server.connections >= 2, "the connection that carried the extra bytes was not used again"


def test_a_range_answer_names_the_range_it_holds(monkeypatch) -> None:
    """An answer framed right but for another range (Content-Range) is not taken for the one asked."""
    listener = socket.create_server(("127.0.0.1", 0))
    listener.settimeout(10)
    answers = [_answer(*SECOND), _answer(*FIRST)]  # the wrong range first, then the right one

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

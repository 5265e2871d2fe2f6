"""Fixtures shared by every suite: a cache directory of the session's own, a GCS emulator on 127.0.0.1,
a fault-injecting proxy in front of it, and a pair of hostile web servers for the url fetchers."""

from __future__ import annotations

import os
import socket
import time
from collections.abc import Iterator

import pytest

from tests.gcs_faults import FaultProxy
from tests.hostile_http import HostileWeb

BUCKET = "dew-test"


@pytest.fixture(scope="session", autouse=True)
def dew_cache(tmp_path_factory) -> Iterator[str]:
    """The session's own DEW_CACHE_DIR: readers cache fetched shards and verification verdicts there,
    never in the home directory."""
    previous = os.environ.get("DEW_CACHE_DIR")
    os.environ["DEW_CACHE_DIR"] = str(tmp_path_factory.mktemp("dew-cache"))
    try:
        yield os.environ["DEW_CACHE_DIR"]
    finally:
        if previous is None:
            os.environ.pop("DEW_CACHE_DIR", None)
        else:
            os.environ["DEW_CACHE_DIR"] = previous


def _free_port() -> int:
    with socket.socket() as s:
        s.bind(("127.0.0.1", 0))
        return s.getsockname()[1]


@pytest.fixture(scope="session")
def gcs_emulator() -> Iterator[str]:
    """gcp-storage-emulator on 127.0.0.1 with bucket dew-test; STORAGE_EMULATOR_HOST points Beam and gcsfs at it.

    It serves from memory and stops with the session; nothing leaves the machine.
    """
    from gcp_storage_emulator.server import create_server

    port = _free_port()
    server = create_server("127.0.0.1", port, in_memory=True, default_bucket=BUCKET)
    server.start()
    deadline = time.monotonic() + 10
    while True:
        try:
            socket.create_connection(("127.0.0.1", port), timeout=1).close()
            break
        except OSError:
            if time.monotonic() > deadline:
                server.stop()
                raise RuntimeError("the GCS emulator did not start within 10 s") from None
            time.sleep(0.05)
    previous = os.environ.get("STORAGE_EMULATOR_HOST")
    os.environ["STORAGE_EMULATOR_HOST"] = f"http://127.0.0.1:{port}"
    try:
        yield os.environ["STORAGE_EMULATOR_HOST"]
    finally:
        server.stop()
        if previous is None:
            os.environ.pop("STORAGE_EMULATOR_HOST", None)
        else:
            os.environ["STORAGE_EMULATOR_HOST"] = previous


@pytest.fixture
def gcs_faults(gcs_emulator: str, monkeypatch: pytest.MonkeyPatch) -> Iterator[FaultProxy]:
    """A FaultProxy in front of the emulator; STORAGE_EMULATOR_HOST points at it for the test.

    Nothing is injected until the test schedules faults with `inject`; every request is counted.
    """
    proxy = FaultProxy(gcs_emulator).start()
    monkeypatch.setenv("STORAGE_EMULATOR_HOST", proxy.url)
    try:
        yield proxy
    finally:
        proxy.stop()


@pytest.fixture
def hostile_web() -> Iterator[HostileWeb]:
    """Two hostile HTTP servers on 127.0.0.1 (tests/hostile_http.py), stopped when the test ends."""
    web = HostileWeb()
    try:
        yield web
    finally:
        web.stop()

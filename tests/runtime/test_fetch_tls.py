"""The fetcher over TLS against a local https server with a certificate of its own: a body that runs to the
connection's end is taken only when the server ended it with close_notify; a TLS stream cut short without one
(how a truncation attack looks) is an http_error, never a shorter image. Kept TLS connections still carry the
next url."""

from __future__ import annotations

import contextlib
import datetime
import ipaddress
import socket
import ssl
from collections.abc import Iterator
from pathlib import Path

import pytest

from dew.data.images.fetch import HTTP_ERROR, Dropped, Fetcher

pytest.importorskip("skimage.data")
pytest.importorskip("cryptography")

from tests.hang_guard import bounded
from tests.hostile_wire import head, image, kind, response
from tests.runtime.test_fetch_wire import LyingServer

GUARD = 120.0  # a hang guard, never a speed test


def certificate(directory: Path) -> tuple[Path, Path]:
    """A self-signed certificate for 127.0.0.1 and its key, as PEM files."""
    from cryptography import x509
    from cryptography.hazmat.primitives import hashes, serialization
    from cryptography.hazmat.primitives.asymmetric import ec

    key = ec.generate_private_key(ec.SECP256R1())
    name = x509.Name([x509.NameAttribute(x509.oid.NameOID.COMMON_NAME, "127.0.0.1")])
    now = datetime.datetime.now(datetime.UTC)
    cert = (
        x509.CertificateBuilder()
        .subject_name(name)
        .issuer_name(name)
        .public_key(key.public_key())
        .serial_number(x509.random_serial_number())
        .not_valid_before(now - datetime.timedelta(days=1))
        .not_valid_after(now + datetime.timedelta(days=1))
        .add_extension(x509.SubjectAlternativeName([x509.IPAddress(ipaddress.ip_address("127.0.0.1"))]), False)
        .add_extension(x509.BasicConstraints(ca=True, path_length=None), True)
        .sign(key, hashes.SHA256())
    )
    cert_path, key_path = directory / "cert.pem", directory / "key.pem"
    cert_path.write_bytes(cert.public_bytes(serialization.Encoding.PEM))
    key_path.write_bytes(
        key.private_bytes(serialization.Encoding.PEM, serialization.PrivateFormat.PKCS8, serialization.NoEncryption())
    )
    return cert_path, key_path


class TlsServer(LyingServer):
    """https on 127.0.0.1: /length/i an exact Content-Length on a kept connection; /clean/i and /ragged/i an
    HTTP/1.0 body ended by the connection's end, whole with close_notify, and half of it without."""

    def __init__(self, cert: Path, key: Path) -> None:
        self.context = ssl.SSLContext(ssl.PROTOCOL_TLS_SERVER)
        self.context.load_cert_chain(cert, key)
        self.connections = 0
        super().__init__()

    def url(self, behaviour: str, i: int) -> str:
        return f"https://127.0.0.1:{self.port}/{behaviour}/{i}"

    def _connection(self, raw: socket.socket) -> None:
        self.connections += 1
        raw.settimeout(10)
        with contextlib.suppress(OSError), self.context.wrap_socket(raw, server_side=True) as conn:
            buffer = b""
            while not self.stopping.is_set():
                while b"\r\n\r\n" not in buffer:
                    data = conn.recv(65536)
                    if not data:
                        return
                    buffer += data
                request, buffer = buffer.split(b"\r\n\r\n", 1)
                _, behaviour, i = request.split(b" ")[1].decode().split("/")
                body = image(int(i))
                if behaviour == "length":
                    conn.sendall(response(body, kind(int(i))))
                    continue
                cut = body if behaviour == "clean" else body[: len(body) // 2]  # a truncation attack's half
                conn.sendall(head("200 OK", {"Content-Type": kind(int(i))}, "HTTP/1.0") + cut)
                if behaviour == "clean":
                    conn.unwrap()  # close_notify, then the TCP close
                return  # /ragged/: the TCP connection closes with no close_notify


@pytest.fixture
def tls_server(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Iterator[TlsServer]:
    cert, key = certificate(tmp_path)
    monkeypatch.setenv("SSL_CERT_FILE", str(cert))  # the fetcher's default context trusts this certificate only
    server = TlsServer(cert, key)
    try:
        yield server
    finally:
        server.stop()


def test_a_tls_body_cut_without_close_notify_is_no_image(tls_server: TlsServer) -> None:
    with bounded(GUARD), Fetcher(timeout=5, retries=1) as fetcher:
        assert fetcher.get(tls_server.url("clean", 1)) == image(1)
        with pytest.raises(Dropped) as dropped:
            fetcher.get(tls_server.url("ragged", 2))
        assert dropped.value.reason == HTTP_ERROR and "close_notify" in str(dropped.value)


def test_kept_tls_connections_carry_the_next_url(tls_server: TlsServer) -> None:
    with bounded(GUARD), Fetcher(timeout=5, retries=0) as fetcher:
        for i in range(6):
            assert fetcher.get(tls_server.url("length", i)) == image(i)
    assert tls_server.connections == 1

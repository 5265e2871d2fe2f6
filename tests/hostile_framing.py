"""The hostile servers' framing attacks (tests/hostile_http.py serves them): lengths, transfer and content codings,
chunk syntax, header limits, close-delimited bodies, interim answers, bodiless statuses and redirects.

Each behaviour answers /<behaviour>/<i> around image i (tests/hostile_wire.py); FRAMING says the reason a fetcher
drops it for, None where image i is fetched. A connection that answered a POISON behaviour must not be used
again (it asked to close, or its framing was faulty): the server keeps it open all the same and answers any
later request on it with another url's image, so a fetcher that reuses it hands that url the wrong bytes.
"""

from __future__ import annotations

import base64
import gzip
import socket
import struct
import time
import zlib
from typing import Protocol

from tests.hostile_wire import IMAGES, chunks, head, image, kind, response

RESET_DELAY = 0.2  # seconds between an answer and the reset after it

FRAMING: dict[str, str | None] = {
    # Content-Length, malformed or in several copies (RFC 9110 8.6, 9112 6.3)
    "cl_plus": "http_error",  # "+N"
    "cl_minus": "http_error",  # "-1", the body after it
    "cl_inner_space": "http_error",  # "N" with a space inside its digits
    "cl_word": "http_error",  # "lots"
    "cl_empty": "http_error",  # an empty value, then the body and another image's whole response
    "cl_hex": "http_error",  # "0x..." of the right length
    "cl_list_differ": "http_error",  # "N, N-64" in one header
    "cl_same_list": None,  # "N, N" in one header: one length, said twice
    "cl_same_twice": None,  # two headers of the same N
    "cl_padded": None,  # "  N  ": spaces around a value are no part of it
    "cl_endless": "too_large",  # a length of 5000 digits
    # Transfer-Encoding
    "te_then_cl": None,  # chunked and a Content-Length that lies: read chunked, never kept
    "te_gzip_chunked": "http_error",  # "gzip, chunked": a transfer coding the fetcher does not undo
    "te_identity": "http_error",  # "identity" beside an exact Content-Length: no coding HTTP/1.1 knows
    "te_empty": "http_error",  # an empty Transfer-Encoding beside a Content-Length
    "te_upper": None,  # "Chunked": coding names are case-insensitive
    "te_http10": None,  # HTTP/1.0, keep-alive and chunked: 1.0 has no transfer codings, so never kept
    # chunk syntax
    "chunk_ext": None,  # every size line with extensions, quoted and bare
    "chunk_trailer": None,  # trailer fields after the last chunk
    "chunk_zeros": None,  # every size with 20 leading zeros
    "chunk_upper": None,  # sizes in upper-case hex
    "chunk_0x": "http_error",  # sizes written "0x3e8"
    # the head's limits and syntax
    "long_line": "http_error",  # one header line of 80 KiB
    "many_headers": "http_error",  # 300 short header lines, under 3 KiB in all
    "space_colon": "http_error",  # "Content-Length : N", a space before the colon
    "folded": None,  # Content-Type folded onto a continuation line
    # the connection's end delimits the body, or the response asked to close
    "close11": None,  # HTTP/1.1, Connection: close, no length: the body ends at the close
    "close_open": None,  # Connection: close and an exact length, the connection left open
    "http10_open": None,  # HTTP/1.0 with an exact length and no keep-alive, the connection left open
    "no_length_open": "timeout",  # HTTP/1.1 keep-alive with no length: the body never ends, whatever it holds
    # answered, then reset, as a server that closes with the request unread does (SO_LINGER 0, RESET_DELAY on)
    "answer_reset": None,  # an exact Content-Length: the body is whole before the reset
    "close_reset": "http_error",  # HTTP/1.0 with no length: a reset is no close, so the body's end is unknown
    # interim answers
    "continue": None,  # 100 Continue, then the image
    "interims": None,  # 100, 102 and 103, then the image
    "interim_body": "http_error",  # a 100 with a Content-Length framing another image's response, then the image
    "switching": "http_error",  # 101 Switching Protocols to a GET that asked for no upgrade
    # Content-Encoding
    "gzip": None,  # the image gzipped
    "deflate": None,  # zlib-wrapped deflate
    "deflate_raw": None,  # raw deflate, as some servers send "deflate"
    "gzip_chunked": None,  # gzipped and chunked
    "gzip_identity": None,  # "gzip, identity"
    "br": "http_error",  # a coding the fetcher cannot undo
    "gzip_lie": "http_error",  # "gzip" over the plain image
    "gzip_html": "no_image",  # a gzipped HTML page as image/jpeg
    "gzip_bomb": "too_large",  # 40 MiB of zeros in 40 KiB of gzip
    # bodiless statuses
    "not_modified": "http_error",  # 304 to a GET that was not conditional, then another image's response
    "odd_retry_after": "http_error",  # 429 with Retry-After "\xb2", a digit to str.isdigit that float() refuses
    # redirects
    "rel_redirect": None,  # Location ../honest/i
    "frag_redirect": None,  # Location /honest/i#frag
    "scheme_relative": None,  # Location //127.0.0.1:<other port>/honest/i
    "file_redirect": "bad_url",  # Location file:///etc/passwd
    "data_redirect": "bad_url",  # Location data:image/png;base64,<the start of another image>
    "redirect_extra": None,  # 302 to /honest/i with Content-Length 0, then another image's response
    "same_scheme": None,  # Location http:/honest/i: the base's scheme and no authority, relative to the base
    "backslashes": None,  # Location \\honest\\i, a slash to a browser
    "two_locations": "http_error",  # 302 with two different Locations (the second to another image)
    "no_location": "http_error",  # 302 without a Location
    "empty_location": "http_error",  # 302 with an empty Location
}
FINAL = frozenset(
    {"switching", "br", "not_modified", "two_locations", "no_location", "empty_location"}
)  # dropped at once
POISON = frozenset({"te_then_cl", "te_http10", "close_open", "http10_open"})


class Server(Protocol):
    def other_base(self) -> str: ...

    def hold(self, conn: socket.socket) -> bool: ...


def poisoned(conn: socket.socket, i: int) -> None:
    """A later request's answer on a connection the fetcher should have let go: another url's image."""
    other = (i + IMAGES // 2) % IMAGES
    conn.sendall(response(image(other), kind(other)))


def _gzip(data: bytes) -> bytes:
    return gzip.compress(data, mtime=0)


def _deflate(data: bytes, wbits: int) -> bytes:
    packer = zlib.compressobj(6, zlib.DEFLATED, wbits)
    return packer.compress(data) + packer.flush()


def _sized(body: bytes, size: str, **headers: str) -> bytes:
    return head("200 OK", {**headers, "Content-Length": size}) + body


def _chunked(body: bytes, version: str = "HTTP/1.1", line=lambda n: b"%x" % n, **headers: str) -> bytes:
    pieces = [line(len(p)) + b"\r\n" + p + b"\r\n" for p in (c.split(b"\r\n", 1)[1][:-2] for c in chunks(body))]
    return head("200 OK", {"Transfer-Encoding": "chunked", **headers}, version) + b"".join(pieces) + b"0\r\n\r\n"


def _redirect(location: str | None) -> bytes:
    return head("302 Found", {"Content-Length": "0", **({} if location is None else {"Location": location})})


def answer(server: Server, conn: socket.socket, behaviour: str, i: int) -> bool:
    """Sends `behaviour`'s answer about image i; whether the connection reads the next request."""
    body, mime = image(i), kind(i)
    other = image((i + 1) % IMAGES)
    smuggled = response(other, kind(i + 1))
    typed = {"Content-Type": mime}
    n = len(body)
    sent = {
        "cl_plus": lambda: _sized(body, f"+{n}", **typed),
        "cl_minus": lambda: _sized(body, "-1", **typed),
        "cl_inner_space": lambda: _sized(body, f"{n // 10} {n % 10}", **typed),
        "cl_word": lambda: _sized(body, "lots", **typed),
        "cl_empty": lambda: _sized(body, "", **typed) + smuggled,
        "cl_hex": lambda: _sized(body, hex(n), **typed),
        "cl_list_differ": lambda: _sized(body, f"{n}, {n - 64}", **typed),
        "cl_same_list": lambda: _sized(body, f"{n}, {n}", **typed),
        "cl_same_twice": lambda: (
            head("200 OK", {**typed, "Content-Length": str(n)})[:-2] + b"Content-Length: %d\r\n\r\n" % n + body
        ),
        "cl_padded": lambda: head("200 OK", typed)[:-2] + b"Content-Length:   %d  \r\n\r\n" % n + body,
        "cl_endless": lambda: _sized(body, "9" * 5000, **typed),
        "te_then_cl": lambda: _chunked(body, **typed, **{"Content-Length": "10"}),
        "te_gzip_chunked": lambda: (
            head("200 OK", {**typed, "Transfer-Encoding": "gzip, chunked"})
            + b"".join(chunks(_gzip(body)))
            + b"0\r\n\r\n"
        ),
        "te_identity": lambda: _sized(body, str(n), **typed, **{"Transfer-Encoding": "identity"}),
        "te_empty": lambda: _sized(body, str(n), **typed, **{"Transfer-Encoding": ""}),
        "te_upper": lambda: (
            head("200 OK", {**typed, "Transfer-Encoding": "Chunked"}) + b"".join(chunks(body)) + b"0\r\n\r\n"
        ),
        "te_http10": lambda: _chunked(body, "HTTP/1.0", **typed, Connection="keep-alive"),
        "chunk_ext": lambda: _chunked(body, line=lambda k: b'%x ; name=value;q="a;b c"; bare' % k, **typed),
        "chunk_trailer": lambda: _chunked(body, **typed)[:-2] + b"X-Checksum: abc\r\nExpires: never\r\n\r\n",
        "chunk_zeros": lambda: _chunked(body, line=lambda k: b"0" * 20 + b"%x" % k, **typed),
        "chunk_upper": lambda: _chunked(body, line=lambda k: b"%X" % k, **typed),
        "chunk_0x": lambda: _chunked(body, line=lambda k: b"0x%x" % k, **typed),
        "long_line": lambda: (
            head("200 OK", {**typed, "X-Long": "x" * (80 << 10)})[:-2] + b"Content-Length: %d\r\n\r\n" % n + body
        ),
        "many_headers": lambda: (
            head("200 OK", {**typed, **{f"X-{k}": "y" for k in range(300)}})[:-2]
            + b"Content-Length: %d\r\n\r\n" % n
            + body
        ),
        "space_colon": lambda: head("200 OK", typed)[:-2] + b"Content-Length : %d\r\n\r\n" % n + body,
        "folded": lambda: _sized(body, str(n), **{"Content-Type": "image/*\r\n " + mime.split("/")[1]}),
        "answer_reset": lambda: response(body, mime),
        "close_reset": lambda: head("200 OK", typed, "HTTP/1.0") + body,
        "close11": lambda: head("200 OK", {**typed, "Connection": "close"}) + body,
        "close_open": lambda: response(body, mime, Connection="close"),
        "http10_open": lambda: head("200 OK", {**typed, "Content-Length": str(n)}, "HTTP/1.0") + body,
        "no_length_open": lambda: head("200 OK", typed) + body,
        "continue": lambda: head("100 Continue", {}) + response(body, mime),
        "interims": lambda: (
            head("100 Continue", {})
            + head("102 Processing", {})
            + head("103 Early Hints", {"Link": "</a>"})
            + response(body, mime)
        ),
        "interim_body": lambda: (
            head("100 Continue", {"Content-Length": str(len(smuggled))}) + smuggled + response(body, mime)
        ),
        "switching": lambda: head("101 Switching Protocols", {"Upgrade": "h2c", "Connection": "Upgrade"}) + body,
        "gzip": lambda: response(_gzip(body), mime, **{"Content-Encoding": "gzip"}),
        "deflate": lambda: response(_deflate(body, zlib.MAX_WBITS), mime, **{"Content-Encoding": "deflate"}),
        "deflate_raw": lambda: response(_deflate(body, -zlib.MAX_WBITS), mime, **{"Content-Encoding": "deflate"}),
        "gzip_chunked": lambda: (
            head("200 OK", {**typed, "Content-Encoding": "gzip", "Transfer-Encoding": "chunked"})
            + b"".join(chunks(_gzip(body)))
            + b"0\r\n\r\n"
        ),
        "gzip_identity": lambda: response(_gzip(body), mime, **{"Content-Encoding": "gzip, identity"}),
        "br": lambda: response(body, mime, **{"Content-Encoding": "br"}),
        "gzip_lie": lambda: response(body, mime, **{"Content-Encoding": "gzip"}),
        "gzip_html": lambda: response(
            _gzip(b"<!doctype html><p>not an image</p>"), "image/jpeg", **{"Content-Encoding": "gzip"}
        ),
        "gzip_bomb": lambda: response(_bomb(), mime, **{"Content-Encoding": "gzip"}),
        "not_modified": lambda: head("304 Not Modified", {}) + smuggled,
        "odd_retry_after": lambda: response(
            b"slow", "text/plain", status="429 Too Many Requests", **{"Retry-After": "\xb2"}
        ),
        "rel_redirect": lambda: _redirect(f"../honest/{i}"),
        "frag_redirect": lambda: _redirect(f"/honest/{i}#frag"),
        "scheme_relative": lambda: _redirect(server.other_base().replace("http:", "", 1) + f"/honest/{i}"),
        "file_redirect": lambda: _redirect("file:///etc/passwd"),
        "data_redirect": lambda: _redirect("data:image/png;base64," + base64.b64encode(other[:3000]).decode()),
        "redirect_extra": lambda: _redirect(f"/honest/{i}") + smuggled,
        "same_scheme": lambda: _redirect(f"http:/honest/{i}"),
        "backslashes": lambda: _redirect(f"\\honest\\{i}"),
        "two_locations": lambda: (
            _redirect(f"/honest/{i}")[:-2] + f"Location: /honest/{(i + 1) % IMAGES}\r\n\r\n".encode()
        ),
        "no_location": lambda: _redirect(None),
        "empty_location": lambda: _redirect(""),
    }[behaviour]()
    conn.sendall(sent)
    if behaviour == "no_length_open":
        return server.hold(conn)
    if behaviour.endswith("_reset"):
        time.sleep(RESET_DELAY)  # the answer delivered whole first: a reset throws away what is still unsent
        conn.setsockopt(socket.SOL_SOCKET, socket.SO_LINGER, struct.pack("ii", 1, 0))
        return False
    return behaviour != "close11"


_BOMB: list[bytes] = []


def _bomb() -> bytes:
    if not _BOMB:
        _BOMB.append(_gzip(bytes(40 << 20)))
    return _BOMB[0]

"""A url string as a browser would send it, or BadUrl: the one place a fetch's url is parsed.

`target(url)` follows the WHATWG URL standard's handling of http(s) urls in the respects that decide what
reaches the wire: surrounding spaces and control characters are stripped and tabs and newlines inside
removed, a backslash before the query is a slash, a non-ASCII host is IDNA-encoded, and the path and
query are percent-encoded as a browser encodes them (spaces, quotes, angle brackets, braces, controls
and every non-ASCII character as its UTF-8 bytes; an existing %XX is kept). The user name and password
and the fragment are never sent. Anything a browser would refuse (another scheme, no host, a port
outside 1..65535, a bracketed host that is not an IPv6 address, a forbidden character in the host, a
label IDNA cannot encode, text that is not Unicode) is BadUrl, with the reason in its message.
"""

from __future__ import annotations

import dataclasses
import ipaddress
import re
import urllib.parse

DEFAULT_PORTS = {"http": 80, "https": 443}
_SCHEME = re.compile(r"[A-Za-z][A-Za-z0-9+.\-]*:")
_TABS_AND_NEWLINES = str.maketrans("", "", "\t\n\r")
_C0_AND_SPACE = "".join(map(chr, range(0x21)))
# What a browser percent-encodes, beyond controls and non-ASCII (WHATWG's path and special-query sets).
_PATH_ENCODED = frozenset(' "<>`{}')
_QUERY_ENCODED = frozenset(" \"<>'")
_FORBIDDEN_IN_HOST = frozenset(" #%/:<>?@[\\]^|")


class BadUrl(ValueError):
    """A url no browser would fetch; the message says what is wrong with it."""


@dataclasses.dataclass(frozen=True)
class Target:
    """Where a request goes and what its request line asks for, all ASCII."""

    scheme: str  # "http" or "https"
    host: str  # IDNA-encoded name or IP address, an IPv6 address without brackets
    port: int
    path: str  # the request target: path and query, percent-encoded

    @property
    def authority(self) -> str:
        """The Host header: the port only where it is not the scheme's default."""
        host = f"[{self.host}]" if ":" in self.host else self.host
        return host if self.port == DEFAULT_PORTS[self.scheme] else f"{host}:{self.port}"

    @property
    def url(self) -> str:
        return f"{self.scheme}://{self.authority}{self.path}"

    @property
    def origin(self) -> tuple[str, str, int]:
        return self.scheme, self.host, self.port


def target(url: str) -> Target:
    """What fetching `url` asks for, or BadUrl."""
    if not isinstance(url, str):
        raise BadUrl(f"a url is a string, got {type(url).__name__}")
    text = url.strip(_C0_AND_SPACE).translate(_TABS_AND_NEWLINES)
    scheme = _SCHEME.match(text)
    if scheme is None or scheme.group()[:-1].lower() not in DEFAULT_PORTS:
        raise BadUrl(f"{_short(url)} is not an http(s) url")
    name = scheme.group()[:-1].lower()
    rest = text[scheme.end() :].split("#", 1)[0]
    before_query, question, query = rest.partition("?")
    # A browser reads a backslash as a slash in an http(s) url, and any run of slashes before the host as two.
    before_query = before_query.replace("\\", "/").lstrip("/")
    authority, slash, path = before_query.partition("/")
    host, port = _authority(authority, name, url)
    request = _encode("/" + path if slash else "/", _PATH_ENCODED, url)
    if question:
        request += "?" + _encode(query, _QUERY_ENCODED, url)
    return Target(scheme=name, host=host, port=port, path=request)


def join(base: Target, location: str) -> Target:
    """The Target a redirect's Location names, relative to the url that answered with it, as WHATWG resolves it:
    a backslash before the query or fragment is a slash, and the base's own scheme followed by no authority
    (`http:/x`, `http:x`) is a reference relative to the base, not a host named x."""
    text = location.strip(_C0_AND_SPACE).translate(_TABS_AND_NEWLINES)
    if scheme := _SCHEME.match(text):
        rest = text[scheme.end() :]
        if scheme.group()[:-1].lower() != base.scheme or rest.replace("\\", "/").startswith("//"):
            return target(text)
        text = rest
    cut = min((at for at in (text.find("?"), text.find("#")) if at >= 0), default=len(text))
    try:
        return target(urllib.parse.urljoin(base.url, text[:cut].replace("\\", "/") + text[cut:]))
    except ValueError as error:
        raise BadUrl(f"the redirect to {_short(location)} is no url: {error}") from None


def _authority(authority: str, scheme: str, url: str) -> tuple[str, int]:
    hostport = authority.rpartition("@")[2]
    if hostport.startswith("["):
        address, bracket, after = hostport[1:].partition("]")
        if not bracket or (after and not after.startswith(":")):
            raise BadUrl(f"{_short(url)} has an unclosed or malformed [IPv6] host")
        try:
            host = ipaddress.IPv6Address(address).compressed
        except ValueError:
            raise BadUrl(f"{_short(url)}: [{address}] is not an IPv6 address") from None
        return host, _port(after[1:] if after else "", scheme, url)
    name, _, port = hostport.rpartition(":") if ":" in hostport else (hostport, "", "")
    return _host(name, url), _port(port, scheme, url)


def _port(text: str, scheme: str, url: str) -> int:
    if not text:
        return DEFAULT_PORTS[scheme]
    if not text.isascii() or not text.isdigit() or not 0 < int(text) <= 65535:
        raise BadUrl(f"{_short(url)}: port {text[:12]!r} is not a number in 1..65535")
    return int(text)


def _host(name: str, url: str) -> str:
    try:
        name = urllib.parse.unquote(name, errors="strict")
    except UnicodeDecodeError:
        raise BadUrl(f"{_short(url)}: the host's %-escapes are not UTF-8") from None
    if not name or not name.strip("."):
        raise BadUrl(f"{_short(url)} has no host")
    if bad := _forbidden(name):
        raise BadUrl(f"{_short(url)}: the host holds {bad!r}, which no host name may")
    if name.isascii():
        return name.lower()
    try:
        encoded = name.lower().encode("idna").decode("ascii")
    except UnicodeError as error:
        raise BadUrl(f"{_short(url)}: the host {name!r} has no IDNA form ({error})") from None
    # IDNA's mapping can itself yield what no host may hold (U+00AF, a macron, maps to a space and a combining
    # macron): a browser refuses such a host, so the encoded form is checked again.
    if bad := _forbidden(encoded):
        raise BadUrl(f"{_short(url)}: the host {name!r} encodes as {encoded!r}, which holds {bad!r}")
    return encoded


def _forbidden(name: str) -> str:
    """The characters of `name` no host name may hold, in order; empty when there are none."""
    return "".join(sorted({c for c in name if c in _FORBIDDEN_IN_HOST or ord(c) < 0x20 or ord(c) == 0x7F}))


def _encode(text: str, encoded: frozenset[str], url: str) -> str:
    """`text` with what a browser escapes percent-encoded as its UTF-8 bytes."""
    if text.isascii() and not any(c in encoded or c < " " or c == "\x7f" for c in text):
        return text  # the usual url: nothing to escape
    out = []
    for char in text:
        if char in encoded or char < " " or char >= "\x7f":
            try:
                out.append("".join(f"%{byte:02X}" for byte in char.encode("utf-8")))
            except UnicodeEncodeError:
                raise BadUrl(f"{_short(url)} holds a lone surrogate, which is no Unicode text") from None
        else:
            out.append(char)
    return "".join(out)


def _short(url: object) -> str:
    text = repr(url)
    return text if len(text) <= 120 else text[:117] + "..."

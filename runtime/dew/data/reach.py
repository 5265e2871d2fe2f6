"""Whether a network endpoint answers at all, asked once before a library would retry against it.

gcsfs, transformers and huggingface_hub retry a connection that fails for up to a minute or more and
then end in a traceback of their own (aiohttp, requests) that names a host, not what the user asked
for. One TCP connect, a few seconds at most, tells an endpoint that cannot be reached (a name that does
not resolve, a refused or unanswered connection) from one that can; the first is then one line naming
what was asked for, where it lives and the network's answer. An endpoint that answered once is not
asked again in this process, so later transient failures still meet each library's own retries.
"""

from __future__ import annotations

import os
import socket
import urllib.parse
import urllib.request
from collections.abc import Callable
from typing import TypeVar

from dew.data.errors import UserError

PROBE_SECONDS = 5.0
HUB = "https://huggingface.co"
_T = TypeVar("_T")
_reached: set[tuple[str, int]] = set()


class Unreachable(UserError, ConnectionError):
    """An endpoint that did not answer a connection: the message is the whole story, in one line."""


def address(url: str, *, proxied: bool = True) -> tuple[str, int]:
    """(host, port) a connection to `url` goes to: its proxy's when one applies, else its own. A proxy
    is connected to directly (an http:// proxy is not itself sent through the http proxy)."""
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    host = parts.hostname or ""
    port = parts.port or (443 if parts.scheme == "https" else 80)
    proxy = urllib.request.getproxies().get(parts.scheme)
    if proxied and proxy and not urllib.request.proxy_bypass(host):
        return address(proxy, proxied=False)
    return host, port


def _cause(error: OSError, host: str, timeout: float) -> str:
    if isinstance(error, socket.gaierror):
        return f"the name {host} does not resolve ({error.strerror})"
    if isinstance(error, ConnectionRefusedError):
        return "the connection was refused"
    if isinstance(error, TimeoutError):
        return f"no answer within {timeout:g} s"
    return error.strerror or str(error)


def ensure(url: str, *, what: str, timeout: float = PROBE_SECONDS) -> None:
    """Returns when `url`'s endpoint accepts a connection; else raises Unreachable naming `what`."""
    host, port = address(url)
    if (host, port) in _reached:
        return
    try:
        socket.create_connection((host, port), timeout=timeout).close()
    except OSError as error:
        raise Unreachable(f"{what}: cannot reach {host}:{port}: {_cause(error, host, timeout)}") from None
    _reached.add((host, port))


def hub_endpoint() -> str:
    return os.environ.get("HF_ENDPOINT") or HUB


def offline(*variables: str) -> bool:
    """Whether HF_HUB_OFFLINE (or another of `variables`) asks the Hugging Face libraries to stay off the hub."""
    names = ("HF_HUB_OFFLINE", *variables)
    return any(os.environ.get(v, "").strip().lower() in ("1", "true", "yes", "on") for v in names)


def is_hub_id(name: str) -> bool:
    """Whether `name` reads as a hub repository id ("name" or "org/name") rather than a file path."""
    return bool(name) and not name.startswith(("/", ".", "~")) and name.count("/") <= 1 and "\\" not in name


def from_hub(load: Callable[..., _T], name: str, *, what: str) -> _T:
    """`load(name)` for a local directory or a hub name. When the hub cannot be reached, a name already
    in the local cache still loads from it (local_files_only), and any other fails in one line."""
    if not is_hub_id(name) or os.path.isdir(os.path.expanduser(name)) or offline():
        return load(name)  # a path (present or not) is no question for the hub
    try:
        ensure(hub_endpoint(), what=f"{what} {name!r} is no local directory, and the hub")
    except Unreachable as unreachable:
        try:
            return load(name, local_files_only=True)
        except OSError:
            raise Unreachable(f"{unreachable}; it is not in the local cache either") from None
    return load(name)

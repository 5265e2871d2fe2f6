"""Failures of a gs:// read that no retry mends, said once, at the first attempt, with their fix.

- A proxy that answers CONNECT to the storage endpoint with a refusal (407: it wants credentials, or
  refused those sent; 403 and the like: it does not allow the tunnel). Another attempt gets the same
  answer, so retrying it for all of DEW_GCS_RETRY_SECONDS would only hide it. A proxy's 408, 429 and
  5xx are retried as the storage server's own would be.
- Google credentials whose refresh failed: google.auth has already retried what it retries (the token
  endpoint's transient answers, the metadata server), so what comes out of it is the answer.
Both name what was read and what to change. A proxy is named by host and port only: its URL may carry
a password, which an error message must not show.
"""

from __future__ import annotations

import re
import urllib.parse
from typing import Any

from dew.data import remote
from dew.data.errors import UserError

# http.client's and urllib3's words for a CONNECT answered with anything but 200.
_TUNNEL = re.compile(r"Tunnel connection failed: (\d{3})\s*([^'\")]*)")


class ProxyRefused(UserError, ConnectionError):
    """A proxy refused the tunnel to the storage endpoint with an answer another attempt meets again."""


class CredentialsFailed(UserError, PermissionError):
    """The Google credentials for gs:// could not be refreshed."""


def proxy_name(url: str) -> str:
    """host:port of a proxy URL, its user and password left out."""
    parts = urllib.parse.urlsplit(url if "://" in url else f"http://{url}")
    return f"{parts.hostname}:{parts.port or 80}"


def refused_tunnel(
    uri: str, error: BaseException, proxy: str, origin: str, *, sent_credentials: bool
) -> ProxyRefused | None:
    """The ProxyRefused to raise where `error`, or an error it was raised from, says a CONNECT through
    `proxy` (host:port) to `origin` was answered with a status no retry changes; None otherwise."""
    found, seen = None, set()
    at: BaseException | None = error
    while at is not None and id(at) not in seen and found is None:
        seen.add(id(at))
        found = _TUNNEL.search(str(at))
        at = at.__cause__ or at.__context__
    if found is None or int(found[1]) in remote._RETRIED_STATUS:
        return None
    status, answer = int(found[1]), f"HTTP {found[1]} {found[2].strip()}".strip()
    said = f"{uri}: the proxy {proxy} refused to open a tunnel to {origin} ({answer})"
    if status == 407 and sent_credentials:
        fix = "it refused the user and password in the proxy URL (https_proxy): check them, percent-encoded"
    elif status == 407:
        fix = (
            f"it asks for credentials: put them in the proxy URL, https_proxy=http://USER:PASSWORD@{proxy} "
            "(percent-encode any @ : / % in them)"
        )
    else:
        fix = (
            f"it does not let this host through to {origin}: ask for CONNECT to it to be allowed, or name "
            "the host in no_proxy if it is reached without the proxy"
        )
    return ProxyRefused(f"{said}; {fix}")


def refresh(uri: str, credentials: Any, request: Any) -> None:
    """`credentials.refresh(request)`, a failure raised as one CredentialsFailed naming `uri` and the fix."""
    import google.auth.exceptions

    try:
        credentials.refresh(request)
    except google.auth.exceptions.GoogleAuthError as error:
        raise credentials_failed(uri, credentials, error) from error


def credentials_failed(uri: str, credentials: Any, error: BaseException) -> CredentialsFailed:
    kind = f" ({type(credentials).__module__}.{type(credentials).__name__})" if credentials is not None else ""
    return CredentialsFailed(
        f"{uri}: the Google credentials{kind} for reading gs:// could not be refreshed: {error}. On a TPU or GCE VM "
        "check that the VM's service account still exists and has the storage read scope; elsewhere run "
        "`gcloud auth application-default login` again, or check the key file GOOGLE_APPLICATION_CREDENTIALS "
        "names"
    )

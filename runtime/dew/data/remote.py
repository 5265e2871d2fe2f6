"""gs:// objects as local files: ArrayRecord and memmap read local paths only.

A remote file not read by range is downloaded whole into a bounded local cache (dew.data.shard_cache);
a shard with block checksums is read by range (dew.data.ranges) through the block cache.

Object reads (meta.json and shards) go through one retry policy: throttling (429, honouring
Retry-After), server errors, dropped connections and short or corrupted bodies are retried with
exponential backoff and full jitter for at most $DEW_GCS_RETRY_SECONDS (default 300). They speak the
JSON API directly rather than through gcsfs, whose own fixed retries neither see Retry-After nor let
a caller bound the total. Listing and existence checks do too, on the same session: gcsfs would retry
a refused proxy or failed credentials for a minute, and its aiohttp client reads neither https_proxy
nor REQUESTS_CA_BUNDLE, so behind a proxy it could not list what dew reads.

The cache lives in $DEW_CACHE_DIR (default ~/.cache/dew) and holds at most $DEW_CACHE_BYTES bytes
(default 64 GiB). A gcsfuse mount needs none of this: give the mount path instead of the gs:// URI.
"""

from __future__ import annotations

import base64
import dataclasses
import functools
import hashlib
import io
import json
import os
import urllib.parse
from collections.abc import Iterator
from typing import Any, BinaryIO, TypeVar

from dew.data import reach, readahead, retries
from dew.data.extras import require
from dew.data.retries import Transient, retry_after, retrying

_T = TypeVar("_T")
_DEFAULT_BUDGET = 64 << 30
_DEFAULT_REQUESTS = 32
# A plain rerun of a committed directory does nothing; only --overwrite writes its shards again.
OVERWRITE = "rerun the preprocess job with --overwrite"


class DamagedError(ValueError):
    """A committed file whose bytes are not the ones its commit recorded (truncated, a flipped byte, an
    edited meta.json), or that cannot be read as what it is. The message names the file and the fix:
    the data is damaged, not the code, so `dew-preprocess` reports it as one line rather than a bug."""


_RETRIED_STATUS = frozenset({408, 429, 500, 502, 503, 504})
# (connect, between bytes): a stalled connection becomes a retry instead of a hang; a slow one that
# keeps sending is left to finish.
_TIMEOUTS = (10.0, 60.0)
_BLOCK = 1 << 22
_SESSION: tuple[tuple[int, str], Any] | None = None


def is_remote(path: str) -> bool:
    return str(path).startswith("gs://")


def resolve(path: str) -> str:
    """The path the filesystem is asked for: a local one with its leading `~` made the user's home, as a
    shell would; a gs:// URI as it is.

    Readers call this as they open a path, never when a spec is made, so a spec's config and a saved
    position keep the path as its user wrote it, and mean the same on a host with another home.
    """
    return path if is_remote(path) else os.path.expanduser(path)


def cache_dir() -> str:
    return os.environ.get("DEW_CACHE_DIR") or os.path.join(os.path.expanduser("~"), ".cache", "dew")


def blocks_dir() -> str:
    """Where dew.data.blockcache keeps shards read by range: its own ledger bounds it, not _make_room."""
    return os.path.join(cache_dir(), "blocks")


def cache_budget() -> int:
    return int(os.environ.get("DEW_CACHE_BYTES", _DEFAULT_BUDGET))


def reachable(uri: str) -> None:
    """Fails at once, in one line naming `uri`, where the storage endpoint does not answer (dew.data.reach)."""
    reach.ensure(_endpoint(), what=f"{uri}: Cloud Storage")


def exists(uri: str) -> bool:
    """Whether `uri` names an object, or a prefix ("directory") that holds one."""
    if uri[len("gs://") :].partition("/")[2].strip("/"):
        try:
            retrying(uri, lambda: _stat(uri))
            return True
        except FileNotFoundError:
            pass
    try:
        return bool(_listing(uri, deep=True, first=True))
    except FileNotFoundError:  # no such bucket
        return False


def list_names(uri: str) -> list[str]:
    """The names of the objects and prefixes directly under the gs:// prefix `uri`, in name order;
    FileNotFoundError where there is none."""
    names = sorted(os.path.basename(p.rstrip("/")) for p in _listing(uri, deep=False))
    if not names:
        raise FileNotFoundError(f"{uri}: no object under it")
    return names


def find(uri: str) -> list[str]:
    """Every object under the gs:// prefix `uri`, at any depth, as gs:// URIs in name order."""
    return sorted(p for p in _listing(uri, deep=True) if not p.endswith("/"))


def _listing(uri: str, *, deep: bool, first: bool = False) -> list[str]:
    """gs:// URIs of the objects under the prefix `uri` taken as a directory (`uri/`), every page of them,
    and unless `deep` the prefixes one level down (ending in "/"), not their contents. A folder's own
    placeholder object (`uri/`, made by the console) is no name under it. With `first`, one page of one."""
    bucket, _, name = uri[len("gs://") :].partition("/")
    prefix = f"{name.strip('/')}/" if name.strip("/") else ""
    url = f"{_endpoint()}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}/o"
    params = {"prefix": prefix, "fields": "items(name),prefixes,nextPageToken"}
    if not deep:
        params["delimiter"] = "/"
    if first:
        params["maxResults"] = "1"
    found: list[str] = []
    while True:
        page = retrying(uri, functools.partial(_json, uri, url, dict(params)))
        found += [item["name"] for item in page.get("items", ()) if item["name"] != prefix]
        found += page.get("prefixes", ())
        if not page.get("nextPageToken") or (first and found):
            return [f"gs://{bucket}/{n}" for n in found]
        params["pageToken"] = page["nextPageToken"]


def _session() -> Any:
    """A requests session for this process: authorised for GCS, plain for an emulator.

    One per process id, because a pooled connection inherited across fork would be shared by two, and
    per endpoint, whose proxy it resolved when it was made.
    """
    global _SESSION
    if _SESSION is None or _SESSION[0] != (os.getpid(), _endpoint()):
        require("google.cloud.storage", for_what="reading gs:// paths")  # its extra brings what follows
        import google.auth
        import google.auth.exceptions
        import google.auth.transport.requests
        import requests
        import requests.adapters

        if os.environ.get("STORAGE_EMULATOR_HOST"):
            session = requests.Session()
        else:
            try:
                credentials, _ = google.auth.default(scopes=["https://www.googleapis.com/auth/devstorage.read_only"])
            except google.auth.exceptions.DefaultCredentialsError as error:
                raise type(error)(
                    f"reading gs:// needs Google credentials, and none were found ({error}). On a TPU or GCE VM "
                    "the VM's service account is used (grant it read access: processed_readers in terraform); "
                    "elsewhere run `gcloud auth application-default login`, or point "
                    "GOOGLE_APPLICATION_CREDENTIALS at a service account key file"
                ) from error
            session = google.auth.transport.requests.AuthorizedSession(credentials)
        # Range reads keep many requests in flight at once (dew.data.ranges): one pooled connection each,
        # so none is opened and dropped a request (urllib3 discards what its pool cannot hold).
        for scheme in ("http://", "https://"):
            session.mount(scheme, requests.adapters.HTTPAdapter(pool_maxsize=max(64, requests_in_flight())))
        _read_environment_once(session, _endpoint())
        _SESSION = ((os.getpid(), _endpoint()), session)
    return _SESSION[1]


def _read_environment_once(session: Any, endpoint: str) -> None:
    """Takes the proxy (NO_PROXY included) and CA bundle variables for `endpoint` now, and stops
    requests reading them again on every request: that scan of os.environ, and the netrc look-up
    beside it, were a third of the client's CPU a small range request."""
    import requests.utils

    if session.trust_env:
        session.proxies.update(requests.utils.get_environ_proxies(endpoint))
        bundle = os.environ.get("REQUESTS_CA_BUNDLE") or os.environ.get("CURL_CA_BUNDLE")
        if bundle and session.verify is True:
            session.verify = bundle
        session.trust_env = False


def get_range(uri: str, target: str, lo: int, hi: int) -> memoryview:
    """Bytes [lo, hi) of an object, exactly, by one Range GET of `target` (dew.data.http_ranges.target)
    on this process's pooled connections: one attempt, for retrying; FileNotFoundError for a 404."""
    session = _session()  # missing credentials are said first: they need no network to find
    client = getattr(session, "dew_ranges", None)
    if client is None:
        from dew.data import http_ranges

        reachable(uri)  # once a client: a range request is too small to pay for the check each time
        client = session.dew_ranges = http_ranges.Client(_endpoint(), getattr(session, "credentials", None))
    return client.get(uri, target, lo, hi)


def refuse_if_resized(uri: str, committed: int, error: BaseException, failures: int) -> None:
    """After a range read of `uri` failed (`error`, its `failures`-th): raises DamagedError naming both
    sizes where the object no longer holds the `committed` bytes meta.json records (cut short, extended
    or rewritten since its commit), which no retry mends. Asked by one stat, not retried, at a failure
    no retry answers (an HTTP error) or the second of any other kind, so a throttled read costs no stat;
    a stat that fails says nothing and the read's own retries go on."""
    if isinstance(error, FileNotFoundError) or not isinstance(error, (Transient, OSError)):
        return
    if isinstance(error, Transient) and failures != 2:
        return
    try:
        size = _stat(uri).size
    except (Transient, OSError, KeyError, ValueError):
        return
    if size != committed:
        raise DamagedError(
            f"{uri}: the object now holds {size} bytes, meta.json records {committed}: it was cut short or "
            f"rewritten since its commit; {OVERWRITE}"
        ) from error


def requests_in_flight() -> int:
    """At most this many range requests of a process are in flight at once: $DEW_GCS_REQUESTS (32)."""
    return max(1, int(os.environ.get("DEW_GCS_REQUESTS", _DEFAULT_REQUESTS)))


def _endpoint() -> str:
    endpoint = os.environ.get("STORAGE_EMULATOR_HOST") or "https://storage.googleapis.com"
    return (endpoint if "://" in endpoint else f"http://{endpoint}").rstrip("/")


def _object_url(uri: str, *, media: bool) -> str:
    bucket, _, name = uri[len("gs://") :].partition("/")
    where = f"b/{urllib.parse.quote(bucket, safe='')}/o/{urllib.parse.quote(name, safe='')}"
    return f"{_endpoint()}/{'download/' if media else ''}storage/v1/{where}"


def bucket_missing(uri: str) -> bool:
    """Whether the bucket of `uri` is known not to exist: asked after an object was not found, to tell a
    mistyped bucket from a missing object. False when it exists, and when this account may read
    objects but not the bucket's own metadata (objectViewer alone), which cannot tell."""
    bucket = uri[len("gs://") :].partition("/")[0]
    url = f"{_endpoint()}/storage/v1/b/{urllib.parse.quote(bucket, safe='')}"
    try:
        retrying(uri, lambda: _get(uri, url, {"fields": "name"}).close())
    except FileNotFoundError:
        return True
    except OSError:
        return False
    return False


def _get(uri: str, url: str, params: dict[str, str], headers: dict[str, str] | None = None) -> Any:
    """The response to one GET, streaming; transient failures raised as Transient, 404 as FileNotFoundError.
    With a Range header only 206 (the range) is an answer: a 200 would be the whole object."""
    import requests

    session = _session()  # missing credentials are said first: they need no network to find
    reachable(uri)
    try:
        response = session.get(url, params=params, headers=headers, stream=True, timeout=_TIMEOUTS)
    except (requests.ConnectionError, requests.Timeout) as error:
        _said_at_once(uri, session, url, error)
        raise Transient(f"{type(error).__name__}: {error}") from error
    except Exception as error:  # an AuthorizedSession's token refresh (google.auth)
        _said_at_once(uri, session, url, error)
        raise
    if response.status_code == (206 if headers and "Range" in headers else 200):
        return response
    response.close()
    if response.status_code == 404:
        raise FileNotFoundError(uri)
    if response.status_code in _RETRIED_STATUS:
        raise Transient(f"HTTP {response.status_code}", retry_after=retry_after(response.headers.get("Retry-After")))
    raise OSError(f"{uri}: HTTP {response.status_code} {response.text[:200]}")


def _said_at_once(uri: str, session: Any, url: str, error: BaseException) -> None:
    """Raises what no retry mends (dew.data.storage_errors): a proxy's refusal of the tunnel, a failed
    refresh of the session's credentials; returns for anything else."""
    import google.auth.exceptions
    import requests

    from dew.data import storage_errors

    if isinstance(error, google.auth.exceptions.GoogleAuthError):
        raise storage_errors.credentials_failed(uri, getattr(session, "credentials", None), error) from error
    proxy = session.proxies.get(urllib.parse.urlsplit(url).scheme)
    if isinstance(error, requests.exceptions.ProxyError) and proxy:
        origin = urllib.parse.urlsplit(url)
        where = f"{origin.hostname}:{origin.port or (443 if origin.scheme == 'https' else 80)}"
        sent = urllib.parse.urlsplit(proxy if "://" in proxy else f"http://{proxy}").username is not None
        name = storage_errors.proxy_name(proxy)
        refused = storage_errors.refused_tunnel(uri, error, name, where, sent_credentials=sent)
        if refused is not None:
            raise refused from error


@dataclasses.dataclass(frozen=True)
class _Object:
    size: int
    generation: str
    crc32c: str | None  # hex, as the cache records it


def _json(uri: str, url: str, params: dict[str, str]) -> Any:
    """The JSON answer to one GET (an object's metadata, a page of a listing); one attempt, for retrying."""
    with _get(uri, url, params) as response:
        body = b"".join(_body(response))
    try:
        return json.loads(body)
    except ValueError as error:  # an answer cut short
        raise Transient(f"unreadable answer: {error}") from error


_LATE = "the body was still coming when the retry budget ran out"


def _body(response: Any) -> Iterator[bytes]:
    """A streamed answer's body as it arrives, never past the retry budget of the `retrying` it runs in.

    The socket's timeout counts silence, not progress: a server sending a byte now and then held a
    read for as long as it liked. Each read takes what has arrived (at least a byte), its wait cut to
    what is left of the budget; spent, or the body cut off, it is Transient. A close of the stream this
    read is for shuts the socket down (readahead.abortable): then it is readahead.Cancelled."""
    import urllib3

    raw, got = response.raw, 0
    sock = getattr(getattr(raw, "connection", None), "sock", None)  # None once urllib3 has let it go
    with readahead.abortable(sock):
        while True:
            left = retries.time_left()
            if left is not None and left <= 0:
                raise Transient(f"{_LATE} ({got} bytes came)")
            if sock is not None and left is not None and left < _TIMEOUTS[1]:
                sock.settimeout(left)  # urllib3 sets its own again before the connection's next request
            try:
                block = raw.read1(_BLOCK, decode_content=True)  # as requests would: a gzipped answer inflated
            except (urllib3.exceptions.HTTPError, OSError) as error:
                if readahead.cancelled():
                    raise readahead.Cancelled("the data iterator that asked for this read was closed") from error
                left = retries.time_left()
                if left is not None and left <= 0:  # the wait, cut to the budget's end, ran it out
                    raise Transient(f"{_LATE} ({got} bytes came)") from error
                raise Transient(f"body cut off after {got} bytes: {error}") from error
            if not block:
                return
            got += len(block)
            yield block


def _stat(uri: str) -> _Object:
    info = _json(uri, _object_url(uri, media=False), {"fields": "size,generation,crc32c"})
    crc = info.get("crc32c")
    return _Object(int(info["size"]), str(info["generation"]), base64.b64decode(crc).hex() if crc else None)


def _download(uri: str, found: _Object, target: BinaryIO, *, sha256: bool) -> tuple[str, str | None]:
    """Writes the object's bytes at `found.generation` into `target`: (crc32c, sha256 if asked), in hex.

    Pinning the generation keeps an object rewritten mid-download from mixing two versions. A short or
    corrupted body is transient: the next attempt starts over.
    """
    import google_crc32c

    target.seek(0)
    target.truncate()
    crc = google_crc32c.Checksum()
    digest = hashlib.sha256() if sha256 else None
    params = {"alt": "media", "generation": found.generation}
    with _get(uri, _object_url(uri, media=True), params) as response:
        for block in _body(response):
            crc.update(block)
            if digest is not None:
                digest.update(block)
            target.write(block)
    got = target.tell()
    if got != found.size:
        raise Transient(f"body holds {got} of {found.size} bytes")
    if found.crc32c is not None and crc.digest().hex() != found.crc32c:
        raise Transient("body fails the object's crc32c")
    return crc.digest().hex(), digest.hexdigest() if digest is not None else None


def read_bytes(uri: str) -> bytes:
    """A small object (meta.json) read whole, uncached: it is what says whether the cache is current."""

    def attempt() -> bytes:
        buffer = io.BytesIO()
        _download(uri, _stat(uri), buffer, sha256=False)
        return buffer.getvalue()

    try:
        return retrying(uri, attempt)
    except FileNotFoundError:
        raise FileNotFoundError(f"{uri} does not exist") from None

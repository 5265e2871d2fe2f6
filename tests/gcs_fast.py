"""A fast GCS-compatible object server on 127.0.0.1, backed by a local directory, for benchmarks.

The PyPI GCS emulator answers 100-200 requests a second on a small machine, so a benchmark of range
reads through it measures the emulator. This server answers the reads dew's client makes
(dew.data.remote's reads, listings and existence checks) and nothing else:
- GET /storage/v1/b/<bucket>: the bucket's metadata (404 where `root/<bucket>` is not a directory);
- GET /storage/v1/b/<bucket>/o?prefix=&delimiter=: a listing (items and prefixes, one page);
- GET /storage/v1/b/<bucket>/o/<name>: an object's metadata (size, generation, crc32c, md5Hash, ...),
  cut to `fields` where asked;
- GET /download/storage/v1/b/<bucket>/o/<name>?alt=media (also without /download): its bytes, 206
  with Content-Range for a Range header, 416 for a range past the end, 404 for another generation.
An object is the file `root/<bucket>/<name>`; its generation is the file's mtime in nanoseconds.

HTTP/1.1 keep-alive, a thread a connection, headers and body in one write with TCP_NODELAY (no Nagle
stall between them). `latency` seconds are slept before each answer's first byte, in that answer's
own thread, so other connections go on; with `bandwidth` (bytes/s) the bodies of all answers together
are paced as over one link (tests.gcs_faults.Link). Only 127.0.0.1 is served, and the server stops
itself when its lifetime runs out.
"""

from __future__ import annotations

import base64
import datetime
import hashlib
import json
import os
import re
import threading
import time
import urllib.parse
from http.server import BaseHTTPRequestHandler

from tests.gcs_faults import Link, LocalServer

_OBJECT = re.compile(r"^(?:/download)?/storage/v1/b/([^/]+)/o/(.+)$")
_LIST = re.compile(r"^/storage/v1/b/([^/]+)/o/?$")
_BUCKET = re.compile(r"^/storage/v1/b/([^/]+)/?$")
_RANGE = re.compile(r"^bytes=(\d*)-(\d*)$")


class FastGCS(LocalServer):
    """Serves the objects under `root` (one directory a bucket) at `url` until `stop` or `lifetime` s."""

    def __init__(
        self, root: str, *, latency: float = 0.0, bandwidth: float | None = None, lifetime: float = 600.0
    ) -> None:
        self.root, self.latency, self.link = root, latency, Link(bandwidth)
        self._sums: dict[tuple[str, int, int], tuple[str, str]] = {}
        self._lock = threading.Lock()
        self.requests = self.connections = 0  # answered, and accepted
        # Range requests held until this many are waiting together (a test's way to have N in flight).
        self.together: threading.Barrier | None = None
        self._serve(self._handler_class(), lifetime)

    def _path(self, bucket: str, name: str) -> str:
        path = os.path.normpath(os.path.join(self.root, bucket, name))
        if not path.startswith(os.path.normpath(self.root) + os.sep):
            raise FileNotFoundError(name)
        return path

    def _checksums(self, path: str, stat: os.stat_result) -> tuple[str, str]:
        """(crc32c, md5Hash) of a file, base64 as GCS gives them, computed once a version."""
        import google_crc32c

        key = (path, stat.st_size, stat.st_mtime_ns)
        with self._lock:
            found = self._sums.get(key)
        if found is None:
            with open(path, "rb") as f:
                data = f.read()
            crc = google_crc32c.Checksum(data).digest()
            found = (base64.b64encode(crc).decode(), base64.b64encode(hashlib.md5(data).digest()).decode())
            with self._lock:
                self._sums[key] = found
        return found

    def _metadata(self, bucket: str, name: str, path: str, stat: os.stat_result) -> dict[str, str]:
        crc32c, md5 = self._checksums(path, stat)
        when = datetime.datetime.fromtimestamp(stat.st_mtime, datetime.UTC).isoformat().replace("+00:00", "Z")
        return {
            "kind": "storage#object",
            "id": f"{bucket}/{name}/{stat.st_mtime_ns}",
            "name": name,
            "bucket": bucket,
            "generation": str(stat.st_mtime_ns),
            "metageneration": "1",
            "contentType": "application/octet-stream",
            "storageClass": "STANDARD",
            "size": str(stat.st_size),
            "crc32c": crc32c,
            "md5Hash": md5,
            "timeCreated": when,
            "updated": when,
        }

    def _listing(self, bucket: str, prefix: str, delimiter: str) -> dict[str, object]:
        top = os.path.join(self.root, bucket)
        items, prefixes = [], set()
        for directory, _, names in os.walk(top):
            for file in names:
                name = os.path.relpath(os.path.join(directory, file), top).replace(os.sep, "/")
                if not name.startswith(prefix):
                    continue
                rest = name[len(prefix) :]
                if delimiter and delimiter in rest:
                    prefixes.add(prefix + rest.split(delimiter)[0] + delimiter)
                else:
                    path = os.path.join(directory, file)
                    items.append(self._metadata(bucket, name, path, os.stat(path)))
        return {
            "kind": "storage#objects",
            "items": sorted(items, key=lambda i: i["name"]),
            "prefixes": sorted(prefixes),
        }

    def _answer(self, path: str, query: dict[str, str], range_header: str | None) -> tuple[int, dict[str, str], bytes]:
        if match := _OBJECT.match(path):
            bucket, name = match.group(1), urllib.parse.unquote(match.group(2))
            try:
                file = self._path(bucket, name)
                stat = os.stat(file)
            except (FileNotFoundError, NotADirectoryError):
                return _error(404, f"No such object: {bucket}/{name}")
            if not os.path.isfile(file) or query.get("generation", str(stat.st_mtime_ns)) != str(stat.st_mtime_ns):
                return _error(404, f"No such object: {bucket}/{name}")
            if query.get("alt") == "media":
                return _media(file, stat.st_size, range_header)
            info = self._metadata(bucket, name, file, stat)
            if fields := query.get("fields"):
                info = {k: v for k, v in info.items() if k in fields.split(",")}
            return _json(200, info)
        if match := _LIST.match(path):
            if not os.path.isdir(os.path.join(self.root, match.group(1))):
                return _error(404, "The specified bucket does not exist.")
            return _json(200, self._listing(match.group(1), query.get("prefix", ""), query.get("delimiter", "")))
        if match := _BUCKET.match(path):
            if not os.path.isdir(os.path.join(self.root, match.group(1))):
                return _error(404, "The specified bucket does not exist.")
            return _json(200, {"kind": "storage#bucket", "name": match.group(1), "id": match.group(1)})
        return _error(400, f"not served here: {path}")

    def _handler_class(self) -> type[BaseHTTPRequestHandler]:
        server = self

        class Handler(BaseHTTPRequestHandler):
            protocol_version = "HTTP/1.1"
            disable_nagle_algorithm = True
            timeout = 30  # an idle keep-alive connection ends its thread

            def log_message(self, *args: object) -> None:
                pass

            def setup(self) -> None:
                super().setup()
                with server._lock:
                    server.connections += 1

            def do_GET(self) -> None:
                parts = urllib.parse.urlsplit(self.path)
                query = dict(urllib.parse.parse_qsl(parts.query))
                status, headers, body = server._answer(parts.path, query, self.headers.get("Range"))
                with server._lock:
                    server.requests += 1
                if server.together is not None and "Range" in self.headers:
                    try:
                        server.together.wait(timeout=30)
                    except threading.BrokenBarrierError:
                        server.together.reset()
                if server.latency:
                    time.sleep(server.latency)
                server.link.pace(len(body))
                lines = [f"HTTP/1.1 {status} {self.responses.get(status, ('',))[0]}"]
                lines += [f"{k}: {v}" for k, v in {**headers, "Content-Length": str(len(body))}.items()]
                self.wfile.write(("\r\n".join(lines) + "\r\n\r\n").encode("latin-1") + body)

            def do_HEAD(self) -> None:
                self.send_error(405)

        return Handler


def _json(status: int, value: object) -> tuple[int, dict[str, str], bytes]:
    return status, {"Content-Type": "application/json; charset=UTF-8"}, json.dumps(value).encode()


def _error(status: int, message: str) -> tuple[int, dict[str, str], bytes]:
    return _json(status, {"error": {"code": status, "message": message, "errors": [{"message": message}]}})


def _media(file: str, size: int, range_header: str | None) -> tuple[int, dict[str, str], bytes]:
    lo, hi, status = 0, size, 200
    if range_header:
        match = _RANGE.match(range_header.strip())
        if match is None:
            return _error(400, f"unreadable Range: {range_header}")
        first, last = match.groups()
        if first:
            lo, hi = int(first), min(size, int(last) + 1) if last else size
        elif last:
            lo = max(0, size - int(last))
        if lo >= size or lo >= hi:
            return 416, {"Content-Range": f"bytes */{size}"}, b""
        status = 206
    with open(file, "rb") as f:
        body = os.pread(f.fileno(), hi - lo, lo)
    headers = {"Content-Type": "application/octet-stream"}
    if status == 206:
        headers["Content-Range"] = f"bytes {lo}-{hi - 1}/{size}"
    return status, headers, body

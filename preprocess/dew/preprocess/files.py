"""File access for the jobs, local or gs://, all through Beam's FileSystems.

One code path serves both: a local output directory and a bucket are written the same way, with a
temporary name first and a rename as the commit. ArrayRecord and pyarrow write local files only, so a
shard is built in a local temporary file and then copied up (`upload`), which keeps memory bounded by
a copy buffer rather than by the shard.
"""

from __future__ import annotations

import dataclasses
import errno
import functools
import hashlib
import os
import re
import shutil
import tempfile
import uuid
from collections.abc import Iterable, Sequence

from apache_beam.io.filesystem import CompressionTypes, FileSystem
from apache_beam.io.filesystems import FileSystems

from dew.data import block_sums, committed, formats, integrity
from dew.data.formats import BLOCKS_SUFFIX, Shard
from dew.data.record_index import INDEX_VERSION, Walker, index_name
from dew.preprocess.quiet import user_error

# Temporary files of a run live here, inside the output directory, so a rename is within one bucket.
TEMP_DIR = committed.TEMP_DIR
_COPY_CHUNK = 1 << 22
# Why a local input symlink leads to no file; each is a drop reason of the read step.
DANGLING_SYMLINK = "dangling_symlink"
SYMLINK_LOOP = "symlink_loop"


@dataclasses.dataclass(frozen=True)
class InputFile:
    """One input file as the job saw it at launch; its place in `inputs` is its file index."""

    path: str
    size: int
    updated: float
    # meta.json's entry when the file is a shard of a committed directory, for the reader to check it against.
    shard: Shard | None = None


def expand_inputs(patterns: Sequence[str]) -> tuple[InputFile, ...]:
    """Every file the patterns name, sorted by path, so the file index never depends on listing order.

    A local symlink that leads nowhere (dangling, or a loop) is listed too, with size 0: the read step
    counts it under its reason (and --strict fails on it) instead of it vanishing from the corpus.
    """
    if not patterns:
        raise ValueError("no input given: pass --input with a path, a glob or a gs:// pattern")
    found: dict[str, InputFile] = {}
    for pattern, result in zip(patterns, FileSystems.match(list(patterns)), strict=True):
        listed = [
            InputFile(meta.path, int(meta.size_in_bytes), float(meta.last_updated_in_seconds or 0))
            for meta in result.metadata_list
            if not (is_local(meta.path) and os.path.isdir(meta.path))  # Beam matches a local folder as itself
        ]
        if is_local(pattern):
            listed += [InputFile(path, 0, os.lstat(path).st_mtime) for path in _broken_links(pattern)]
        if not listed:
            raise FileNotFoundError(_matches_nothing(pattern))
        for item in listed:
            if not item.path.rstrip("/").split("/")[-1].startswith("."):  # editors' swap files, our temporaries
                found[item.path] = item
    return tuple(found[path] for path in sorted(found))


def same_file_key(path: str) -> object:
    """What names one file however its path is spelt: a local file's device and inode (so `in/a.jsonl`,
    `./in/a.jsonl`, its absolute path, a symlink or a hard link to it are one), else the path."""
    if not is_local(path):
        return path
    try:
        stat = os.stat(path)
    except OSError:  # a dangling link or a loop: listed by its own name, for the reader to count
        return os.path.abspath(path)
    return stat.st_dev, stat.st_ino


def verified(path: str, shard: Shard) -> str:
    """A local path holding the committed shard at `path` (itself, or a gs:// shard's cached copy), after
    checking its bytes against `shard`'s sha256 from meta.json (dew.data.formats.verify_shard, once per
    host and file state) and its own footer's record count against meta.json's
    (dew.data.committed.check_own_records); refuses one that differs, naming it, as no longer what its
    directory committed."""
    directory = path[: -len(shard.name)].rstrip("/") if path.endswith(shard.name) else os.path.dirname(path)
    try:
        local = formats.verify_shard(directory, shard, checksum=True, own_records=True)
    except formats.DamagedError as error:  # its size, checksum or count differs: it names the shard and the fix
        raise user_error(error) from None
    return local


def _matches_nothing(pattern: str) -> str:
    """Why `pattern` gave no input file, naming what the user gave: a folder, not `folder/**`, the
    pattern the jobs that read whole folders list it by."""
    folder = pattern.removesuffix("**").rstrip("/") or pattern
    local = is_local(folder)
    if (local and not os.path.isdir(folder)) or (not local and folder == pattern):
        return f"--input {pattern!r} matches no file"
    if pattern == folder and os.listdir(folder):
        return f"--input {folder!r} is a folder; name its files with a glob, e.g. '{folder}/*'"
    return f"--input {folder!r} is a folder that holds no file"


def link_problem(path: str) -> str | None:
    """DANGLING_SYMLINK or SYMLINK_LOOP when `path` is a local symlink that leads to no file, else None."""
    if not is_local(path) or not os.path.islink(path):
        return None
    try:
        os.stat(path)
    except FileNotFoundError:
        return DANGLING_SYMLINK
    except OSError as error:
        if error.errno == errno.ELOOP:
            return SYMLINK_LOOP
        raise
    return None


def _broken_links(pattern: str) -> list[str]:
    """The symlinks leading nowhere that a local pattern names.

    Beam's local match lists a glob's directory tree and drops without a word every entry whose size it
    cannot read, and a plain path that does not resolve matches nothing; this looks where it looked.
    """
    if pattern.endswith("/"):
        pattern += "*"
    prefix = re.split(r"[\[*?]", pattern, maxsplit=1)[0]
    if prefix == pattern:
        return [pattern] if link_problem(pattern) else []
    matches = re.compile(FileSystem.translate_pattern(pattern)).match
    links = []
    for directory, _, names in os.walk(os.path.dirname(prefix)):
        for name in names:
            path = os.path.join(directory, name)
            if matches(path) and link_problem(path):
                links.append(path)
    return links


def manifest_fingerprint(inputs: Iterable[InputFile]) -> str:
    """Names the input set: every path with its size and modification time."""
    digest = hashlib.sha256()
    for item in inputs:
        # A local name that is not UTF-8 keeps its own bytes (Python holds them as surrogate escapes).
        digest.update(f"{item.path}\0{item.size}\0{item.updated:.0f}\n".encode("utf-8", "surrogateescape"))
    return digest.hexdigest()[:32]


def join(directory: str, *names: str) -> str:
    return FileSystems.join(directory, *names)


def exists(path: str) -> bool:
    return FileSystems.exists(path)


def is_local(path: str) -> bool:
    return FileSystems.get_scheme(path) in (None, "file")


def has_filesystem(path: str) -> bool:
    """Whether FileSystems can read `path`: False for a url of a scheme no file system serves (http://)."""
    try:
        FileSystems.get_filesystem(path)
    except ValueError:
        return False
    return True


def is_regular_file(path: str) -> bool:
    """False for a local directory, pipe or device (reading one would fail, or never end); an object
    store holds nothing else."""
    return not is_local(path) or os.path.isfile(path)


def utf8_name(path: str) -> bool:
    """Whether a listed path has a UTF-8 spelling (a local name that is not UTF-8 arrives as surrogate escapes)."""
    try:
        path.encode("utf-8")
    except UnicodeEncodeError:
        return False
    return True


def shown_path(path: str) -> str:
    """`path` as printable text: a name that is not UTF-8 as the bytes it holds."""
    return path if utf8_name(path) else repr(os.fsencode(path))


def open_read(path: str):
    """A binary reader of the raw bytes; decompression is the caller's choice, by name."""
    return FileSystems.open(path, compression_type=CompressionTypes.UNCOMPRESSED)


def read_bytes(path: str) -> bytes:
    with open_read(path) as f:
        return f.read()


def require_bucket(path: str) -> None:
    """Refuses a gs:// path whose bucket does not exist, by name, before a job writes anything there.

    Without this a mistyped bucket fails later as an unexplained listing error. An identity that may
    write objects but not read the bucket's own metadata (objectUser alone) cannot tell, so it is let
    through to fail, if it must, on its first write.
    """
    if not path.startswith("gs://"):
        return
    from google.api_core.exceptions import Forbidden

    bucket = path.removeprefix("gs://").split("/", 1)[0]
    try:
        # A gs:// path resolves to Beam's GCSFileSystem, whose _gcsIO the FileSystem base does not declare.
        found = FileSystems.get_filesystem(path)._gcsIO().get_bucket(bucket)  # type: ignore[attr-defined]
    except Forbidden:
        return
    if found is None:
        raise FileNotFoundError(
            f"bucket gs://{bucket} does not exist (or not in a project this account can see), so {path} "
            "cannot be written: create it (terraform apply in terraform/examples/dataflow_preprocess), or "
            "fix the bucket name"
        )


def listing(directory: str) -> list[str]:
    """Base names of the files directly inside `directory` (none when it does not exist)."""
    pattern = join(directory, "*")
    try:
        results = FileSystems.match([pattern])
    except Exception:  # Beam raises BeamIOError for a missing local directory
        return []
    prefix = directory.rstrip("/") + "/"
    names = []
    for meta in results[0].metadata_list:
        rest = meta.path[len(prefix) :] if meta.path.startswith(prefix) else os.path.basename(meta.path)
        if rest and "/" not in rest and not (is_local(meta.path) and os.path.isdir(meta.path)):
            names.append(rest)
    return sorted(names)


def delete(paths: Sequence[str]) -> None:
    present = [p for p in paths if exists(p)]
    if present:
        FileSystems.delete(present)


def delete_tree(directory: str) -> None:
    if is_local(directory):
        shutil.rmtree(directory, ignore_errors=True)
        return
    # An object store has no directories to delete: only the objects under the prefix exist.
    (found,) = FileSystems.match([directory.rstrip("/") + "/*"])
    paths = [m.path for m in found.metadata_list]
    if paths:
        FileSystems.delete(paths)


def temp_name(directory: str, name: str) -> str:
    """A unique temporary path for `name`: every attempt of a retried bundle gets its own."""
    return join(directory, TEMP_DIR, f"{name}.{uuid.uuid4().hex}")


def commit(temporary: str, final: str, *, replace: bool = False) -> bool:
    """Renames a finished temporary file to its final name; False when another attempt got there first.

    The content of a shard is a function of the inputs and config, so the earlier attempt's file is the
    same bytes and the later one just steps aside. `replace` is for files rewritten on purpose (meta.json).
    """
    if exists(final):
        if not replace:
            delete([temporary])
            return False
        if not is_local(final):
            delete([final])  # GCS rename is copy + delete and refuses an existing target
    if is_local(final):
        os.makedirs(os.path.dirname(final) or ".", exist_ok=True)
        os.replace(temporary, final)
    else:
        FileSystems.rename([temporary], [final])
    return True


def upload(local: str, final: str, output: str, *, replace: bool = False) -> bool:
    """Commits a local file under `final` (inside `output`), through a temporary name beside it."""
    temporary = temp_name(output, os.path.basename(final))
    if is_local(final):
        os.makedirs(os.path.dirname(temporary), exist_ok=True)
        shutil.copyfile(local, temporary)
    else:
        with open(local, "rb") as source, FileSystems.create(temporary) as target:
            while block := source.read(_COPY_CHUNK):
                target.write(block)
    return commit(temporary, final, replace=replace)


def write_atomic(path: str, data: bytes, output: str) -> None:
    """Writes small content (meta.json, stats.json) under a temporary name, then renames it into place."""
    with tempfile.NamedTemporaryFile(delete=False) as f:
        f.write(data)
    try:
        upload(f.name, path, output, replace=True)
    finally:
        os.unlink(f.name)


@dataclasses.dataclass(frozen=True)
class Checksums:
    """What a writer records of one shard file: sha256 and crc32c of the whole, its size, and the
    crc32c of each block of `block_bytes` bytes (`blocks`, the content of its `.blocks` file; b"" and 0
    where google-crc32c is missing, and readers then fetch a gs:// shard whole), and for an ArrayRecord
    file of one record a chunk its record index (`index`, the content of its `.index` file; b"" for
    any other file, or without block checksums, and readers then fetch it whole)."""

    sha256: str
    crc32c: str
    size: int
    blocks: bytes
    block_bytes: int
    index: bytes = b""

    def shard(self, name: str, *, record_count: int, units: int) -> Shard:
        """The meta.json entry of the shard `name` these are the checksums of, holding `record_count` records
        of `units` units in all."""
        blocks_crc32c = self.sidecar[1] if self.block_bytes else ""
        return Shard(
            name=name,
            records=record_count,
            units=units,
            bytes=self.size,
            sha256=self.sha256,
            crc32c=self.crc32c,
            block_bytes=self.block_bytes,
            blocks_crc32c=blocks_crc32c,
            blocks_version=block_sums.BLOCKS_VERSION if self.block_bytes else 0,
            index_version=INDEX_VERSION if self.index else 0,
            index_crc32c=integrity.digest_bytes(self.index) if self.index else "",
        )

    @functools.cached_property
    def sidecar(self) -> tuple[bytes, str]:
        """The `.blocks` file of the two-level layout readers fetch by range, and its blocks_crc32c."""
        return block_sums.sidecar(self.blocks, self.block_bytes)

    def write_blocks(self, final: str, output: str) -> None:
        """Writes the block checksums beside the shard committed (or about to be) at `final`; rewriting
        them is harmless, so a rerun that finds the shard committed writes them again."""
        if self.block_bytes:
            write_atomic(final + BLOCKS_SUFFIX, self.sidecar[0], output)
        if self.index:
            write_atomic(index_name(final), self.index, output)


def checksums_of(path: str, *, name: str | None = None) -> Checksums:
    """The checksums of a file anywhere FileSystems reaches, read once in chunks; `name` is the shard's
    committed name where `path` is a temporary one (it decides the block size).

    crc32c is what readers check a local shard against when they can (much cheaper than sha256), and
    the block checksums (of integrity.block_bytes_for the file: 256 bytes for a .bin token shard, else
    4 KiB) what they check a byte range of a gs:// shard against; an ArrayRecord file's
    record index is walked from the same bytes (dew.data.record_index).
    """
    digest = integrity.Digest(block_bytes=integrity.block_bytes_for(name or path))
    walker = Walker()
    size = 0
    with open_read(path) as f:
        while block := f.read(_COPY_CHUNK):
            digest.update(block)
            walker.update(block)
            size += len(block)
    index = walker.index() if digest.block_bytes else b""
    return Checksums(digest.sha256, digest.crc32c, size, digest.blocks, digest.block_bytes, index)


def download(path: str, directory: str) -> str:
    """A local copy of `path` under `directory` (the path itself when it is local already)."""
    if is_local(path):
        return path
    local = os.path.join(directory, os.path.basename(path))
    with open_read(path) as source, open(local, "wb") as target:
        while block := source.read(_COPY_CHUNK):
            target.write(block)
    return local

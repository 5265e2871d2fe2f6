"""Arrays in an .npz file mapped from disk rather than loaded, so their size costs no memory or time at startup.

A derived index holds 8 bytes or more a record. Loaded whole (np.load), a pod with billions of records
and dozens of worker processes per host would hold gigabytes per process and spend a startup that grows
with the corpus reading it. Mapped, a process pays only for the pages it touches, and the processes of
a host share those pages through the page cache.

np.savez already stores members uncompressed, so every .npz dew ever wrote can be mapped: a member's
.npy data starts at a fixed offset in the file (the zip local header, then the .npy header). The writer
here also pads each member's local header (in a zip extra field, as Android's zipalign does) so the
data starts 64-byte aligned, and stamps a fixed date, so the same arrays give the same bytes. Any
zip or numpy reader still reads the file.

A mapped array pickles as where it lies (file, offset, file identity), not as its bytes: a source sent
to a Grain worker process maps the same pages there instead of copying the index into every worker.
"""

from __future__ import annotations

import dataclasses
import mmap
import os
import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

_ALIGN = 64
# The extra-field id zipalign pads with; readers skip extra fields they do not know.
_PAD_ID = 0xD935
_LOCAL_HEADER = struct.Struct("<4s22xHH")  # signature, 22 bytes we do not read, name and extra lengths
_ZIP64_LOCAL_EXTRA = 20  # what zipfile adds to a local header written with force_zip64
_DATE = (1980, 1, 1, 0, 0, 0)


def write_arrays(path: str, arrays: Mapping[str, np.ndarray]) -> None:
    """Writes `arrays` to `path` as an uncompressed .npz whose array data is 64-byte aligned in the file."""
    with zipfile.ZipFile(path, "w", compression=zipfile.ZIP_STORED, allowZip64=True) as archive:
        for name, value in arrays.items():
            array = np.asanyarray(value)
            info = zipfile.ZipInfo(f"{name}.npy", date_time=_DATE)
            info.compress_type = zipfile.ZIP_STORED
            # .npy headers are padded to a multiple of 64 bytes, so aligning the member aligns the data.
            fixed = archive.start_dir + _LOCAL_HEADER.size + len(info.filename.encode()) + _ZIP64_LOCAL_EXTRA + 4
            pad = -fixed % _ALIGN
            info.extra = struct.pack("<HH", _PAD_ID, pad) + bytes(pad)
            with archive.open(info, "w", force_zip64=True) as member:
                np.lib.format.write_array(member, array, allow_pickle=False)


@dataclasses.dataclass(frozen=True)
class _Where:
    """Where a mapped array's bytes lie, and which state of the file they were mapped from."""

    path: str
    offset: int
    dtype: str
    shape: tuple[int, ...]
    fortran: bool
    identity: tuple[int, int, int]


class MappedArray(np.ndarray):
    """A read-only array over a mapped file, pickled as where it lies.

    Only the whole array keeps that: what is computed or sliced from it is a plain ndarray (a view
    pickled as its bytes, which for a slice is what a slice should cost).
    """

    _where: _Where | None = None

    def __array_finalize__(self, obj: Any) -> None:
        self._where = None

    def __array_wrap__(self, obj: Any, context: Any = None, return_scalar: bool = False) -> Any:
        if return_scalar:
            return obj[()]
        return obj.view(np.ndarray) if isinstance(obj, np.ndarray) else obj

    def __getitem__(self, key: Any) -> Any:
        value = super().__getitem__(key)
        return value.view(np.ndarray) if isinstance(value, np.ndarray) else value

    def __reduce__(self) -> Any:
        if self._where is None:
            return self.view(np.ndarray).__reduce__()
        return _remap, (self._where,)


def _identity(path: str) -> tuple[int, int, int]:
    stat = os.stat(path)
    return stat.st_ino, stat.st_size, stat.st_mtime_ns


def _remap(where: _Where) -> np.ndarray:
    """The array `where` describes, mapped again (in a worker process); refused if the file changed since."""
    if _identity(where.path) != where.identity:
        raise ValueError(
            f"{where.path} changed after this process's parent mapped it; restart the run so every process reads "
            "one version of it"
        )
    with open(where.path, "rb") as f:
        return _array(_map(f), where)


def _map(f: Any) -> mmap.mmap:
    buffer = mmap.mmap(f.fileno(), 0, access=mmap.ACCESS_READ)
    # An index is read a few entries at a time at scattered places: on a cold page cache, readahead
    # would read from disk far more around every entry a batch looks up than the entry itself.
    buffer.madvise(mmap.MADV_RANDOM)
    return buffer


def _array(buffer: mmap.mmap, where: _Where) -> np.ndarray:
    dtype, order = np.dtype(where.dtype), "F" if where.fortran else "C"
    if not np.prod(where.shape, dtype=np.int64):
        return np.zeros(where.shape, dtype=dtype, order=order)  # a buffer cannot be viewed at its very end
    array = np.ndarray(where.shape, dtype=dtype, buffer=buffer, offset=where.offset, order=order).view(MappedArray)
    array._where = where
    return array


def _members(path: str) -> Iterator[tuple[zipfile.ZipInfo, int]]:
    """Every member of the zip at `path` with the file offset its data starts at (after its local header)."""
    with zipfile.ZipFile(path) as archive, open(path, "rb") as f:
        for info in archive.infolist():
            f.seek(info.header_offset)
            signature, name, extra = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
            if signature != b"PK\x03\x04":
                raise zipfile.BadZipFile(f"member {info.filename} has no local header")
            yield info, info.header_offset + _LOCAL_HEADER.size + name + extra


def map_arrays(path: str) -> dict[str, np.ndarray]:
    """Every array of the .npz at `path`, mapped (a compressed member, which cannot be, is read).

    Reads only the zip directory and the .npy headers: O(members), whatever the arrays hold. Nothing
    here checks the arrays' bytes; member_crcs does, once per host (dew.data.formats.load_derived).
    Raises ValueError (or zipfile.BadZipFile, OSError) for a file that is not such an archive.
    """
    identity = _identity(path)
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
        buffer = _map(f)
        for info, start in _members(path):
            name = info.filename.removesuffix(".npy")
            if info.compress_type != zipfile.ZIP_STORED:
                with zipfile.ZipFile(path) as archive, archive.open(info) as member:
                    arrays[name] = np.lib.format.read_array(member, allow_pickle=False)
                continue
            f.seek(start)
            version = np.lib.format.read_magic(f)
            if version == (1, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_1_0(f)
            elif version == (2, 0):
                shape, fortran, dtype = np.lib.format.read_array_header_2_0(f)
            else:
                raise ValueError(f"member {info.filename} is .npy version {version}, which dew does not map")
            if dtype.hasobject:
                raise ValueError(f"member {info.filename} holds Python objects")
            where = _Where(path, f.tell(), dtype.str, tuple(shape), fortran, identity)
            if where.offset + int(np.prod(shape, dtype=np.int64)) * dtype.itemsize > start + info.file_size:
                raise ValueError(f"member {info.filename} is shorter than the array its header describes")
            arrays[name] = _array(buffer, where)
    return arrays


def recorded_crcs(path: str) -> str:
    """The CRC-32 of every member as the zip directory records it, as hex: what member_crcs gives for an
    intact file. Reads the directory only."""
    with zipfile.ZipFile(path) as archive:
        return ",".join(f"{info.CRC:08x}" for info in archive.infolist())


def member_crcs(path: str) -> str:
    """The CRC-32 of every member as its bytes hold it, as hex. Reads the whole file in bounded blocks,
    so callers cache the verdict (dew.data.integrity.verify_once)."""
    found = []
    with open(path, "rb") as f:
        for info, start in _members(path):
            if info.compress_type != zipfile.ZIP_STORED:
                with zipfile.ZipFile(path) as archive, archive.open(info) as member:
                    while member.read(1 << 22):  # zipfile checks the CRC as the stream ends
                        pass
                found.append(f"{info.CRC:08x}")
                continue
            f.seek(start)
            crc, left = 0, info.file_size
            while left:
                block = f.read(min(left, 1 << 22))
                if not block:
                    break  # truncated: the CRC cannot match
                crc, left = zlib.crc32(block, crc), left - len(block)
            found.append(f"{crc:08x}")
    return ",".join(found)

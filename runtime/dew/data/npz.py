"""Derived .npz files laid out so their large arrays are read in place (dew.data.paged), not loaded.

A derived index holds 8 bytes or more a record. Loaded whole (np.load), a pod with billions of records
and dozens of worker processes per host would hold gigabytes per process and spend a startup that grows
with the corpus reading it. Read in place, a process reads only the blocks its batches need.

np.savez already stores members uncompressed, so every .npz dew ever wrote can be read in place: a
member's .npy data starts at a fixed offset in the file (the zip local header, then the .npy header).
The writer here also pads each member's local header (in a zip extra field, as Android's zipalign
does) so the data starts 64-byte aligned, and stamps a fixed date, so the same arrays give the same
bytes. Any zip or numpy reader still reads the file.
"""

from __future__ import annotations

import struct
import zipfile
import zlib
from collections.abc import Iterator, Mapping

import numpy as np

from dew.data import paged

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


# Members up to this size are read into memory when the file is opened (it costs no more than a few
# blocks would); larger 1-D members are paged.
PAGED_FROM = 1 << 20


def _members(path: str) -> Iterator[tuple[zipfile.ZipInfo, int]]:
    """Every member of the zip at `path` with the file offset its data starts at (after its local header)."""
    with zipfile.ZipFile(path) as archive, open(path, "rb") as f:
        for info in archive.infolist():
            f.seek(info.header_offset)
            signature, name, extra = _LOCAL_HEADER.unpack(f.read(_LOCAL_HEADER.size))
            if signature != b"PK\x03\x04":
                raise zipfile.BadZipFile(f"member {info.filename} has no local header")
            yield info, info.header_offset + _LOCAL_HEADER.size + name + extra


def open_arrays(path: str) -> dict[str, np.ndarray]:
    """Every array of the .npz at `path`: a large 1-D member as a paged.FileArray over the file, the
    rest (and any compressed member, which cannot be paged) read into memory.

    Reads only the zip directory, the .npy headers and the small members: O(members), whatever the
    large arrays hold. Nothing here checks the arrays' bytes; member_crcs does, once per host
    (dew.data.formats.load_derived). Raises ValueError (or zipfile.BadZipFile, OSError) for a file that
    is not such an archive.
    """
    state = paged.identity(path)
    arrays: dict[str, np.ndarray] = {}
    with open(path, "rb") as f:
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
                raise ValueError(f"member {info.filename} is .npy version {version}, which dew cannot read in place")
            if dtype.hasobject:
                raise ValueError(f"member {info.filename} holds Python objects")
            offset, count = f.tell(), int(np.prod(shape, dtype=np.int64))
            if offset + count * dtype.itemsize > start + info.file_size:
                raise ValueError(f"member {info.filename} is shorter than the array its header describes")
            if len(shape) == 1 and count * dtype.itemsize >= PAGED_FROM:
                arrays[name] = paged.FileArray(paged.Where(path, offset, dtype.str, count, state))  # type: ignore[assignment]
            else:
                data = np.frombuffer(f.read(count * dtype.itemsize), dtype=dtype, count=count)
                arrays[name] = data.reshape(shape, order="F" if fortran else "C")
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

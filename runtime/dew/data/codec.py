"""The packed-dict record codec: one record holding several named byte arrays.

Every record that holds more than one field (an image with its caption, a clip with its audio, token
ids beside anything else) is a packed dict, written and read only through this module. The layout, for
each entry in the order the writer gave them, with every integer a little-endian uint32:

    key length (4 bytes) · key (UTF-8) · value length (4 bytes) · value bytes

Entries follow each other with no header, padding or trailer, so an empty dict is zero bytes and a
record is exactly the sum of its entries. Keys are non-empty and unique within a record; a value is any
byte string up to 4 GiB - 1 (a numpy array is stored as its raw bytes, dtype and shape are the kind's to
record in meta.json). A record that ends inside an entry, repeats a key or holds a key that is not UTF-8
is refused, naming where the record came from.
"""

from __future__ import annotations

import struct
from collections.abc import Iterator, Mapping
from typing import Any

import numpy as np

_LENGTH = struct.Struct("<I")
_MAX = (1 << 32) - 1


def _value_bytes(key: str, value: Any) -> bytes:
    if isinstance(value, np.ndarray):
        return np.ascontiguousarray(value).tobytes()
    if isinstance(value, bytes | bytearray | memoryview):
        return bytes(value)
    raise TypeError(f"packed dict field {key!r} holds {type(value).__name__}; a field is bytes or a numpy array")


def pack_dict_of_byte_arrays(entries: Mapping[str, Any]) -> bytes:
    """One record from named byte arrays (bytes or numpy arrays), in the mapping's order."""
    parts: list[bytes] = []
    for key, value in entries.items():
        if not isinstance(key, str) or not key:
            raise ValueError(f"packed dict keys are non-empty strings, got {key!r}")
        name, data = key.encode(), _value_bytes(key, value)
        if len(name) > _MAX or len(data) > _MAX:
            raise ValueError(f"packed dict field {key!r} is larger than 4 GiB - 1 bytes")
        parts += [_LENGTH.pack(len(name)), name, _LENGTH.pack(len(data)), data]
    return b"".join(parts)


def _entries(record: bytes, where: str) -> Iterator[tuple[bytes, int, int]]:
    """(key bytes, value start, value end) of every entry, refusing a record that ends mid-entry."""
    view, at, size = memoryview(record), 0, len(record)
    while at < size:
        if at + 4 > size:
            raise ValueError(f"{where}: the packed record ends inside a key length at byte {at}; the record is corrupt")
        (key_length,) = _LENGTH.unpack_from(view, at)
        key_end = at + 4 + key_length
        if key_end + 4 > size:
            raise ValueError(f"{where}: the packed record ends inside the entry at byte {at}; the record is corrupt")
        (value_length,) = _LENGTH.unpack_from(view, key_end)
        value_end = key_end + 4 + value_length
        if value_end > size:
            raise ValueError(
                f"{where}: the packed record's entry at byte {at} declares {value_length} value bytes but only "
                f"{size - key_end - 4} remain; the record is truncated"
            )
        yield bytes(view[at + 4 : key_end]), key_end + 4, value_end
        at = value_end


def unpack_dict_of_byte_arrays(record: bytes, where: str = "record") -> dict[str, bytes]:
    """Every field of a packed record, in the order written. `where` names the record in errors."""
    out: dict[str, bytes] = {}
    for key, start, end in _entries(record, where):
        try:
            name = key.decode()
        except UnicodeDecodeError:
            raise ValueError(f"{where}: the packed record holds a key that is not UTF-8 ({key[:20]!r})") from None
        if not name or name in out:
            raise ValueError(f"{where}: the packed record holds the key {name!r} {'twice' if name else 'empty'}")
        out[name] = record[start:end]
    return out


def unpack_field(record: bytes, field: str, where: str = "record") -> bytes:
    """The one field `field` of a packed record, without copying the others."""
    wanted = field.encode()
    for key, start, end in _entries(record, where):
        if key == wanted:
            return record[start:end]
    raise KeyError(f"{where}: the packed record has no field {field!r}")

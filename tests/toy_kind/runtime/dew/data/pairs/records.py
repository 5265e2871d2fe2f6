"""The pairs record codec, both ways: one packed dict a record, and the batch of a list of them."""

from __future__ import annotations

from collections.abc import Sequence
from typing import Any

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays

FIELDS = ("left", "right")


def pack_pair(left: str, right: str) -> bytes:
    return pack_dict_of_byte_arrays({"left": left.encode(), "right": right.encode()})


def unpack_pairs(raw: Sequence[bytes], where: Sequence[str]) -> dict[str, Any]:
    records = [unpack_dict_of_byte_arrays(r, w) for r, w in zip(raw, where, strict=True)]
    return {name: [r[name].decode() for r in records] for name in FIELDS}

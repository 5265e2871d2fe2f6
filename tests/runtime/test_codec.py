"""The packed-dict codec: its documented byte layout, round trips, and refusals that name the record."""

from __future__ import annotations

import numpy as np
import pytest
from hypothesis import given
from hypothesis import strategies as st

from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays, unpack_field

keys = st.text(min_size=1, max_size=12)
entries = st.dictionaries(keys, st.binary(max_size=64), max_size=6)


def test_the_layout_is_the_documented_one_byte_for_byte() -> None:
    record = pack_dict_of_byte_arrays({"image": b"\xff\xd8", "caption": "é".encode()})
    assert record == (
        b"\x05\x00\x00\x00" + b"image" + b"\x02\x00\x00\x00" + b"\xff\xd8"
        + b"\x07\x00\x00\x00" + b"caption" + b"\x02\x00\x00\x00" + "é".encode()
    )  # fmt: skip
    assert pack_dict_of_byte_arrays({}) == b""


@given(entries)
def test_every_dict_round_trips_in_order(data: dict[str, bytes]) -> None:
    record = pack_dict_of_byte_arrays(data)
    back = unpack_dict_of_byte_arrays(record)
    assert list(back.items()) == list(data.items())
    for key, value in data.items():
        assert unpack_field(record, key) == value


def test_numpy_arrays_are_stored_as_their_raw_bytes() -> None:
    ids = np.arange(5, dtype=np.uint32)
    record = pack_dict_of_byte_arrays({"ids": ids, "mask": ids[::2]})  # a strided view is made contiguous
    assert np.frombuffer(unpack_field(record, "ids"), np.uint32).tolist() == [0, 1, 2, 3, 4]
    assert np.frombuffer(unpack_field(record, "mask"), np.uint32).tolist() == [0, 2, 4]


@given(entries.filter(bool), st.data())
def test_a_truncated_record_is_refused_naming_where_it_came_from(data: dict[str, bytes], draw) -> None:
    record = pack_dict_of_byte_arrays(data)
    cut = draw.draw(st.integers(1, len(record) - 1))
    ends = {0}
    for key, value in data.items():
        ends.add(max(ends) + 8 + len(key.encode()) + len(value))
    if cut in ends:
        return  # a cut between entries leaves a shorter, valid record
    with pytest.raises(ValueError, match=r"shard-3\.array_record record 17: .*(corrupt|truncated)"):
        unpack_dict_of_byte_arrays(record[:cut], "shard-3.array_record record 17")


def test_bad_keys_and_values_are_refused() -> None:
    twice = pack_dict_of_byte_arrays({"a": b"1"}) * 2
    with pytest.raises(ValueError, match="'a' twice"):
        unpack_dict_of_byte_arrays(twice, "r")
    not_utf8 = b"\x01\x00\x00\x00\xff\x00\x00\x00\x00"
    with pytest.raises(ValueError, match="not UTF-8"):
        unpack_dict_of_byte_arrays(not_utf8, "r")
    with pytest.raises(KeyError, match="no field 'text'"):
        unpack_field(pack_dict_of_byte_arrays({"a": b""}), "text", "r")
    with pytest.raises(TypeError, match="holds str"):
        pack_dict_of_byte_arrays({"caption": "a string, not bytes"})
    with pytest.raises(ValueError, match="non-empty"):
        pack_dict_of_byte_arrays({"": b"x"})

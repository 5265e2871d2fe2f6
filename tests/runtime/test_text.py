"""ByteTokenizer and tokenizer_for."""

from __future__ import annotations

import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import ByteTokenizer, HFTokenizer, tokenizer_for


@given(st.text())
@settings(max_examples=200)
def test_byte_decode_inverts_encode(text: str) -> None:
    tokenizer = ByteTokenizer()
    ids = tokenizer.encode(text)
    assert all(0 <= i < 256 for i in ids)
    assert tokenizer.decode(ids) == text
    assert tokenizer.encode_batch([text, text]) == [ids, ids]


def test_byte_decode_of_ids_that_are_not_utf8_marks_each_bad_sequence_with_a_replacement_character() -> None:
    # A model can emit any byte sequence; decode gives text rather than raising, and says where it could not.
    tokenizer = ByteTokenizer()
    assert tokenizer.decode([0xFF, 0x41, 0xC3]) == "\ufffdA\ufffd"
    assert tokenizer.decode([0x68, 0xC3, 0xA9]) == "hé"  # valid UTF-8 comes back byte for byte


def test_tokenizer_for_resolves_names_without_loading() -> None:
    assert isinstance(tokenizer_for("byte"), ByteTokenizer)
    hf = tokenizer_for("/no/such/tokenizer", local_files_only=True)
    assert isinstance(hf, HFTokenizer) and hf._tokenizer is None  # nothing loaded yet
    with pytest.raises(OSError, match="cannot load tokenizer '/no/such/tokenizer'"):
        hf.encode("hello")
    with pytest.raises(ValueError, match="tokenizer name is required"):
        tokenizer_for("")

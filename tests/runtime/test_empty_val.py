"""A committed directory whose held-out split holds nothing: refused when validation is asked for.

The images job writes a `val` split whenever --val_fraction is set, and a fraction too small for the
corpus leaves it empty. Every kind that reads committed directories used to skip such a split and hand
back Dataset.val None without a word, so a run asking to score the split found out at its first
evaluation. Directories without a held-out split keep taking theirs off the end of train.
"""

from __future__ import annotations

import pytest

from dew.data import ArrayRecordImages, Loading, PackedTokens, TokenWindows
from tests.runtime import image_support
from tests.runtime import token_support as tokens

SERIAL = Loading(workers=0)


def token_corpus(directory: str, val: int) -> str:
    docs = tokens.documents(60, longest=30)
    return tokens.write_corpus(directory, {"train": docs, "val": tokens.documents(val)}, shards=1)


def image_directory(directory: str, val: int) -> str:
    rows = image_support.records(16 + val)
    image_support.write_committed(directory, {"train": [rows[:16]], "val": [rows[16:]]})
    return directory


KINDS = {
    "TokenWindows": (token_corpus, lambda path, **kw: TokenWindows(path=path, seq_len=8, loading=SERIAL, **kw)),
    "PackedTokens": (token_corpus, lambda path, **kw: PackedTokens(path=path, seq_len=15, loading=SERIAL, **kw)),
    "ArrayRecordImages": (
        image_directory,
        lambda path, **kw: ArrayRecordImages(path=path, image_size=32, loading=SERIAL, **kw),
    ),
}


@pytest.mark.parametrize("kind", KINDS)
@pytest.mark.parametrize("val_batches", [None, 1])
def test_an_empty_held_out_split_is_refused_naming_the_directory_and_the_fix(kind, val_batches, tmp_path) -> None:
    write, spec = KINDS[kind]
    path = write(str(tmp_path / "d"), val=0)
    with pytest.raises(ValueError) as refused:
        spec(path, val_batches=val_batches).load(batch=2)
    message = str(refused.value)
    assert message.startswith(f"{path}: its held-out split 'val' holds no records")
    assert "val_batches=0" in message and "--val_fraction" in message


@pytest.mark.parametrize("kind", KINDS)
def test_val_batches_0_reads_the_train_split_alone(kind, tmp_path) -> None:
    write, spec = KINDS[kind]
    data = spec(write(str(tmp_path / "d"), val=0), val_batches=0).load(batch=2)
    assert data.val is None and data.records


@pytest.mark.parametrize("kind", KINDS)
def test_a_held_out_split_with_records_is_the_validation_pass(kind, tmp_path) -> None:
    write, spec = KINDS[kind]
    data = spec(write(str(tmp_path / "d"), val=8), val_batches=None).load(batch=2)
    assert data.val is not None


def test_a_token_split_too_short_for_one_window_is_refused_not_skipped(tmp_path) -> None:
    """Documents but not one window of seq_len + 1 ids: the validation pass would be empty."""
    path = tokens.write_corpus(
        str(tmp_path / "d"), {"train": tokens.documents(60, longest=30), "val": [tokens.documents(1)[0][:3]]}, shards=1
    )
    with pytest.raises(ValueError, match="the validation split holds 0 records, fewer than one global batch"):
        TokenWindows(path=path, seq_len=8, loading=SERIAL, val_batches=None).load(batch=2)

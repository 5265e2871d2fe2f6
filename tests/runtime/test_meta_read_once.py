"""A load parses each corpus's meta.json once, however many of its parts (splits, held-out split, plans,
checksums, mixture members) consult it, and reading batches parses it no more: one PackedTokens load with
a validation split used to parse it 8 times, an ArrayRecordImages load 3."""

from __future__ import annotations

import collections
import os
from pathlib import Path

import pytest

from dew.data import ArrayRecordImages, DataPartition, Loading, PackedTokens, TokenWindows, formats
from dew.data.video.clip_shards import ClipShards
from tests.runtime import image_support
from tests.runtime import token_support as tokens
from tests.runtime.test_clip_shards import write_clips

SERIAL = Loading(workers=0)


def token_corpus(directory: str) -> str:
    # Each directory its own documents: a mixture refuses two corpora that hold the same windows.
    docs = tokens.documents(60, longest=30, seed=ord(os.path.basename(directory)[0]))
    return tokens.write_corpus(directory, {"train": docs, "val": tokens.documents(12)}, shards=2, block_bytes=256)


def image_directory(directory: str) -> str:
    rows = image_support.records(20)
    image_support.write_committed(directory, {"train": [rows[:8], rows[8:16]], "val": [rows[16:]]}, checksums=True)
    return directory


def clip_directory(directory: str) -> str:
    return str(write_clips(Path(directory)))


KINDS = {
    "TokenWindows": (token_corpus, lambda paths: TokenWindows(path=paths[0], seq_len=8, loading=SERIAL)),
    "PackedTokens": (token_corpus, lambda paths: PackedTokens(path=paths[0], seq_len=15, loading=SERIAL)),
    "PackedTokens mixture": (
        token_corpus,
        lambda paths: PackedTokens(path={paths[0]: 0.5, paths[1]: 0.5}, seq_len=15, loading=SERIAL),
    ),
    "ArrayRecordImages": (
        image_directory,
        lambda paths: ArrayRecordImages(path=paths[0], image_size=32, loading=SERIAL, val_batches=None),
    ),
    "ClipShards": (clip_directory, lambda paths: ClipShards(path=paths[0], loading=SERIAL)),
}


@pytest.mark.parametrize("kind", KINDS)
def test_a_load_and_its_batches_parse_each_meta_json_once(
    kind: str, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    write, spec = KINDS[kind]
    paths = [write(str(tmp_path / name)) for name in ("a", "b")]
    parsed: collections.Counter[str] = collections.Counter()
    read = formats._read_meta

    def counted(directory: str, kind: str | None = None) -> formats.Meta:
        parsed[os.path.realpath(directory)] += 1
        return read(directory, kind)

    monkeypatch.setattr(formats, "_read_meta", counted)
    data = spec(paths).load(batch=2)
    with data.train(DataPartition()) as stream:
        next(stream)
    if data.val is not None:
        next(iter(data.val(DataPartition())))
    assert parsed and set(parsed.values()) == {1}, dict(parsed)

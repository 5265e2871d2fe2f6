"""Readers and directories dew wrote but never committed, or whose meta.json lost touch with its shards.

A killed images job leaves its shards under their final names beside its claim and temporaries; a
committed directory can lose its meta.json; a meta.json can be rewritten with another record count.
None of them may read as a corpus: each is refused by name, while a raw shard set with no dew marks
beside them still reads, every record equal to the one written.
"""

from __future__ import annotations

import dataclasses
import json
import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import ArrayRecordImages, ClipShards, Loading, committed, formats
from dew.data.formats import Meta
from dew.data.images import image_records
from tests.runtime import image_support as support
from tests.runtime.test_clip_shards import every_clip, write_clips

FAST = Loading(workers=0, threads=2, read_buffer=8)
TRAIN = [support.records(5), support.records(4)]
VAL = [support.records(3)]


def spec(path: str, **fields) -> ArrayRecordImages:
    return ArrayRecordImages(path, image_size=32, loading=FAST, val_batches=0, **fields)


def load(path: str, **fields) -> object:
    return spec(path, **fields).load(batch=2)


def killed_job(directory: Path) -> Path:
    """What an images job killed before its commit leaves: its shards, its claim and temporaries, no meta.json."""
    support.write_committed(str(directory), {"train": TRAIN, "val": VAL})
    (directory / formats.META).unlink()
    claim = {"fingerprint": "0" * 32, "config": {"job": "images", "size": 64}, "inputs": "x"}
    (directory / committed.JOB_MARKER).write_text(json.dumps(claim))
    (directory / committed.TEMP_DIR).mkdir()
    (directory / committed.TEMP_DIR / "train-00001-of-00002.array_record.1f2e").write_bytes(b"half a shard")
    return directory


def every_record(records: image_records.ImageRecords) -> list[dict]:
    batch = records.read_batch(np.arange(len(records)))
    return [{"image": batch["image"][i], "caption": batch["caption"][i]} for i in range(len(records))]


def test_a_killed_jobs_directory_is_refused_naming_what_it_is_what_is_missing_and_the_fix(tmp_path: Path) -> None:
    directory = killed_job(tmp_path / "images")
    with pytest.raises(committed.UncommittedError) as refused:
        load(str(directory))
    message = str(refused.value)
    assert "a dew images job's directory that was never committed" in message
    assert ".dew-job.json and .dew-tmp present, meta.json missing" in message
    assert f"Rerun `dew-preprocess images ... --output {directory}`" in message


def test_every_reader_refuses_the_same_directory_with_the_same_words(tmp_path: Path) -> None:
    directory = str(killed_job(tmp_path / "images"))
    with pytest.raises(committed.UncommittedError) as images:
        load(directory)
    with pytest.raises(committed.UncommittedError) as clips:
        ClipShards(path=directory, loading=FAST).load(batch=2)
    with pytest.raises(committed.UncommittedError) as meta:
        formats.read_meta(directory, kind="images")
    # One check, one message: the job named is the one whose claim the directory holds, whoever reads it.
    assert str(images.value) == str(clips.value) == str(meta.value)


def test_a_committed_directory_that_lost_its_meta_json_is_refused_naming_its_shards(tmp_path: Path) -> None:
    directory = tmp_path / "images"
    support.write_committed(str(directory), {"train": TRAIN, "val": VAL})
    (directory / formats.META).unlink()
    with pytest.raises(committed.UncommittedError, match=r"holds dew shards \(train-00000-of-00002.array_record"):
        load(str(directory))


def test_a_raw_set_beside_them_still_reads_every_record_as_written(tmp_path: Path) -> None:
    killed_job(tmp_path / "killed")
    written = [support.records(3, image="jpg", caption="txt"), support.records(5, image="jpg", caption="txt")[3:]]
    support.write_raw_set(str(tmp_path / "raw"), written)
    records = image_records.raw(str(tmp_path / "raw"), image_records.raw_files(str(tmp_path / "raw"), asked=False))
    flat = [r for shard in written for r in shard]
    assert every_record(records) == [{"image": r["jpg"], "caption": r["txt"].decode()} for r in flat]


def test_raw_sets_asked_for_by_name_read_a_killed_jobs_shards_as_they_are(tmp_path: Path) -> None:
    killed_job(tmp_path / "killed")
    records = spec(str(tmp_path), shards=("killed",)).raw_sets(str(tmp_path), ("killed",))
    written = [r for shard in (*TRAIN, *VAL) for r in shard]  # name order: train-00000, train-00001, val-00000
    assert every_record(records) == [{"image": r["image"], "caption": r["caption"].decode()} for r in written]


def rewrite_records(directory: Path, split: str, index: int, delta: int) -> str:
    """meta.json rewritten (checksum and all) with shard `index` of `split` holding `delta` more records."""
    meta = formats.read_meta(str(directory))
    listed = list(meta.splits[split])
    listed[index] = dataclasses.replace(listed[index], records=listed[index].records + delta)
    formats.write_meta(str(directory), Meta(section=meta.section, splits={**meta.splits, split: tuple(listed)}))
    return listed[index].name


@pytest.mark.parametrize("delta", [-1, 1])
def test_a_record_count_unlike_the_shards_own_footer_is_refused_naming_the_shard(tmp_path: Path, delta) -> None:
    directory = tmp_path / "images"
    support.write_committed(str(directory), {"train": TRAIN})
    name = rewrite_records(directory, "train", 1, delta)
    records = image_records.committed(formats.read_meta(str(directory)), str(directory), "train")
    good = records.read_batch(np.arange(5))  # the good shard before it still reads, record for record
    assert good["image"] == [r["image"] for r in TRAIN[0]]
    assert good["caption"] == [r["caption"].decode() for r in TRAIN[0]]
    expected = rf"{directory / name} holds 4 records by its own footer, but meta.json records {4 + delta}"
    with pytest.raises(formats.DamagedError, match=expected):
        records.read_batch(np.array([5]))


def test_a_clip_count_unlike_the_shards_footer_is_refused_naming_the_shard_not_an_index_error(tmp_path: Path) -> None:
    directory = write_clips(tmp_path / "clips")
    name = rewrite_records(directory, "train", 0, 1)
    expected = rf"{name} holds 7 records by its own footer, but meta.json records 8"
    with pytest.raises(formats.DamagedError, match=expected):
        every_clip(directory)


def test_a_gone_directory_is_no_dew_directory() -> None:
    assert committed.listing(os.path.join("/nonexistent", "dew")) == []
    assert committed.dew_signs(["00000.array_record", "train.bin", "notes.txt"]) == []


def uncommitted_tokens(directory: Path, kind: str, state: str) -> Path:
    """One shard of a token directory a tokenize job left uncommitted: `killed` (its claim and temporaries
    there) or `lost` (a committed directory whose meta.json went, its shards' .blocks sidecars still beside
    them), or `raw` (shards named alike with no dew mark beside them: another tool's, read as they are)."""
    from tests.runtime.token_support import documents, write_corpus

    write_corpus(str(directory), {"train": documents(10)}, kind=kind, block_bytes=0 if state == "raw" else 256)
    (directory / formats.META).unlink()
    if state == "killed":
        (directory / committed.JOB_MARKER).write_text(json.dumps({"config": {"job": "tokenize"}}))
        (directory / committed.TEMP_DIR).mkdir()
    return directory / formats.shard_name("train", 0, 2, kind)


@pytest.mark.parametrize("kind", ["bin", "array_record", "parquet"])
@pytest.mark.parametrize("state", ["killed", "lost"])
def test_a_shard_of_an_uncommitted_token_directory_read_on_its_own_is_refused(tmp_path: Path, kind, state) -> None:
    """TokenWindows read a file named on its own as a raw file whenever no meta.json lay beside it: a
    killed tokenize job's first shard trained as if it were the corpus, never checked."""
    from dew.data import TokenWindows

    shard = uncommitted_tokens(tmp_path / "tokens", kind, state)
    said = "never committed" if state == "killed" else rf"holds dew shards \({shard.name}"
    with pytest.raises(committed.UncommittedError, match=said):
        TokenWindows(path=str(shard), seq_len=8, loading=Loading(workers=0), val_batches=None).load(batch=2)


@pytest.mark.parametrize("kind", ["bin", "parquet"])
def test_a_file_named_like_a_shard_with_no_dew_mark_beside_it_still_reads(tmp_path: Path, kind) -> None:
    """Other tools name files `train-00000-of-00002.parquet` too (a Hugging Face upload): only dew's own
    marks, not the name, make a directory one dew wrote."""
    from dew.data import TokenWindows

    shard = uncommitted_tokens(tmp_path / "tokens", kind, "raw")
    data = TokenWindows(path=str(shard), seq_len=4, loading=Loading(workers=0), val_batches=None).load(batch=1)
    assert data.train is not None


@pytest.mark.parametrize("kind", ["bin", "parquet"])
def test_a_shard_named_file_meta_json_does_not_list_is_refused_not_read_by_its_dtype(tmp_path: Path, kind) -> None:
    """A committed directory holds no shard its meta.json does not list (the commit deletes stale ones),
    so one named on its own was put there by hand; it was read as it is, by meta.json's dtype and eos."""
    from dew.data import TokenWindows
    from tests.runtime.token_support import documents, write_corpus

    directory = tmp_path / "tokens"
    write_corpus(str(directory), {"train": documents(10)}, kind=kind)
    extra = directory / formats.shard_name("train", 2, 3, kind)
    extra.write_bytes((directory / formats.shard_name("train", 0, 2, kind)).read_bytes())
    with pytest.raises(ValueError, match=rf"{extra} is named as a shard, but {directory}/meta.json lists no"):
        TokenWindows(path=str(extra), seq_len=4, loading=Loading(workers=0), val_batches=None).load(batch=1)

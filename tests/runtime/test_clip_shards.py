"""ClipShards over a dew.clips/1 directory written here record by record (no Beam, no video decoding):
damage to a committed directory and readers of another kind are refused by name, and a position with
validation held out resumes exactly on another share count."""

from __future__ import annotations

import os
from pathlib import Path

import numpy as np
import pytest

from dew.data import ArrayRecordImages, DataPartition, Loading, TokenWindows, formats
from dew.data.formats import Meta, Shard
from dew.data.sections import ClipsSection
from dew.data.video.clip_records import pack_clip, section_fields
from dew.data.video.clip_shards import ClipShards
from tests.support import assert_resume_exact, read_global

pytest.importorskip("array_record")

FAST = Loading(workers=0, threads=2, read_buffer=4)
SECTION = ClipsSection(
    frames=2, frame_size=4, frame_rate=25.0, frame_encoding="raw", audio_rate=1000, audio_dtype="float32",
    fields=section_fields(audio=True),
)  # fmt: skip


def write_clips(directory: Path, shards: int = 2, per_shard: int = 7) -> Path:
    """A committed clips directory whose clip n has every pixel n and its caption "clip n"."""
    from array_record.python.array_record_module import ArrayRecordWriter

    directory.mkdir(parents=True)
    listing = []
    samples = round(SECTION.frames / SECTION.frame_rate * SECTION.audio_rate)
    for index in range(shards):
        name = formats.shard_name("train", index, shards, "array_record")
        writer = ArrayRecordWriter(str(directory / name), "group_size:1")
        units = 0
        for n in range(index * per_shard, (index + 1) * per_shard):
            frames = np.full((SECTION.frames, SECTION.frame_size, SECTION.frame_size, 3), n, dtype=np.uint8)
            record = pack_clip(
                SECTION, frames, np.zeros(samples, np.float32), caption=f"clip {n}", source=f"v{n}.mp4", span=(0, 0.08)
            )
            writer.write(record)
            units += len(record)
        writer.close()
        path = str(directory / name)
        listing.append(Shard(name, per_shard, units, os.path.getsize(path), formats.sha256_file(path)))
    formats.write_meta(str(directory), Meta(section=SECTION, splits={"train": tuple(listing)}, config={"job": "test"}))
    return directory


def first_batch(spec) -> dict:
    data = spec.load(batch=2)
    stream = data.train(DataPartition())
    try:
        return next(stream)
    finally:
        stream.close()


def test_a_flipped_byte_in_a_committed_shard_is_refused_naming_it(tmp_path: Path) -> None:
    directory = write_clips(tmp_path / "clips")
    shard = directory / formats.shard_name("train", 1, 2, "array_record")
    data = bytearray(shard.read_bytes())
    data[len(data) // 2] ^= 1  # inside a clip's raw frames: the record still parses
    shard.write_bytes(bytes(data))
    with pytest.raises(ValueError, match=shard.name):
        read_global(ClipShards(path=str(directory), loading=FAST).load(batch=14).train, 1, 1)


def test_a_deleted_shard_is_refused_naming_it(tmp_path: Path) -> None:
    directory = write_clips(tmp_path / "clips")
    (directory / formats.shard_name("train", 0, 2, "array_record")).unlink()
    with pytest.raises(FileNotFoundError, match=r"train-00000-of-00002\.array_record is listed in meta\.json"):
        ClipShards(path=str(directory), loading=FAST).load(batch=2)


def test_readers_of_another_kind_name_the_clips_reader(tmp_path: Path) -> None:
    directory = str(write_clips(tmp_path / "clips"))
    images, tokens = ArrayRecordImages(path=directory, loading=FAST), TokenWindows(path=directory, seq_len=8)
    for spec in (images, tokens):
        with pytest.raises(formats.WrongKindError, match=r"holds clips .* read it with ClipShards"):
            first_batch(spec)


def test_a_split_the_directory_lacks_is_refused_naming_the_directory_and_its_splits(tmp_path: Path) -> None:
    directory = write_clips(tmp_path / "clips")
    with pytest.raises(ValueError, match=rf"{directory} has no split 'validation'; its splits: train: give split="):
        ClipShards(path=str(directory), split="validation", loading=FAST).load(batch=2)


def test_an_uncommitted_directory_names_the_job_that_writes_clips(tmp_path: Path) -> None:
    with pytest.raises(FileNotFoundError, match=r"never committed.*`dew-preprocess decode-clips \.\.\. --output"):
        ClipShards(path=str(tmp_path), loading=FAST).load(batch=2)


@pytest.mark.parametrize(("before", "after", "stop_at"), [(1, 2, 2), (2, 1, 3), (2, 4, 5)])
def test_a_position_resumes_exactly_on_another_share_count_with_validation_held_out(
    tmp_path: Path, before: int, after: int, stop_at: int
) -> None:
    spec = ClipShards(path=str(write_clips(tmp_path / "clips")), val_batches=1, seed=5, loading=FAST)
    data = spec.load(batch=4)
    assert data.records == 10  # 14 clips, the last 4 held out; steps past 2 run into the next epoch
    assert_resume_exact(data.train, steps=7, stop_at=stop_at, count_before=before, count_after=after)
    (val,) = list(data.val(DataPartition()))
    assert val["caption"] == [f"clip {n}" for n in range(10, 14)]
    assert [int(f[0, 0, 0, 0]) for f in val["frames"]] == list(range(10, 14))


def test_parquet_clips_are_refused_naming_the_flag_that_writes_readable_ones(tmp_path: Path) -> None:
    written = tmp_path / "train-00000-of-00001.parquet"  # what decode-clips --format parquet writes
    written.write_bytes(b"PAR1")
    shard = Shard(written.name, 1, 4, 4, formats.sha256_file(str(written)))
    formats.write_meta(str(tmp_path), Meta(section=SECTION, splits={"train": (shard,)}, config={"job": "test"}))
    with pytest.raises(ValueError, match=r"not held in \.array_record shards.*--format array_record"):
        ClipShards(path=str(tmp_path), loading=FAST).load(batch=1)

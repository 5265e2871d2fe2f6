"""ClipShards over a dew.clips/1 directory written here record by record (no Beam, no video decoding):
damage to a committed directory and readers of another kind are refused by name, a position with
validation held out resumes exactly on another share count, and has_audio is read where the records
hold it and never guessed where an older layout cannot say."""

from __future__ import annotations

import dataclasses
import logging
import os
from pathlib import Path

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import ArrayRecordImages, DataPartition, Loading, Ramp, TokenWindows, formats, ramped
from dew.data.codec import pack_dict_of_byte_arrays, unpack_dict_of_byte_arrays
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


# What decode-clips wrote before its records said whether their video has an audio stream.
OLD_SECTION = dataclasses.replace(SECTION, fields=("frames", "audio", "caption", "source", "span"))


def audible(n: int) -> bool:
    return n % 3 != 0


def write_clips(
    directory: Path,
    shards: int = 2,
    per_shard: int = 7,
    section: ClipsSection = SECTION,
    config: dict | None = None,
    edit=lambda record: record,
) -> Path:
    """A committed clips directory whose clip n has every pixel n, its caption "clip n", and audio from
    its video where audible(n); `edit` changes a record's bytes before it is written."""
    from array_record.python.array_record_module import ArrayRecordWriter

    directory.mkdir(parents=True)
    listing = []
    samples = round(section.frames / section.frame_rate * section.audio_rate)
    for index in range(shards):
        name = formats.shard_name("train", index, shards, "array_record")
        writer = ArrayRecordWriter(str(directory / name), "group_size:1")
        units = 0
        for n in range(index * per_shard, (index + 1) * per_shard):
            frames = np.full((section.frames, section.frame_size, section.frame_size, 3), n, dtype=np.uint8)
            record = pack_clip(
                section, frames, np.zeros(samples, np.float32), caption=f"clip {n}", source=f"v{n}.mp4",
                span=(0, 0.08), has_audio=audible(n),
            )  # fmt: skip
            record = edit(record)
            writer.write(record)
            units += len(record)
        writer.close()
        path = str(directory / name)
        listing.append(Shard(name, per_shard, units, os.path.getsize(path), formats.sha256_file(path)))
    meta = Meta(section=section, splits={"train": tuple(listing)}, config=config or {"job": "test"})
    formats.write_meta(str(directory), meta)
    return directory


def every_clip(directory: Path) -> dict:
    records = ClipShards(path=str(directory), loading=FAST).records()
    return records.read_batch(np.arange(len(records)))


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
    assert val["has_audio"].tolist() == [audible(n) for n in range(10, 14)]
    assert [int(f[0, 0, 0, 0]) for f in val["frames"]] == list(range(10, 14))


def test_parquet_clips_are_refused_naming_the_flag_that_writes_readable_ones(tmp_path: Path) -> None:
    written = tmp_path / "train-00000-of-00001.parquet"  # what decode-clips --format parquet writes
    written.write_bytes(b"PAR1")
    shard = Shard(written.name, 1, 4, 4, formats.sha256_file(str(written)))
    formats.write_meta(str(tmp_path), Meta(section=SECTION, splits={"train": (shard,)}, config={"job": "test"}))
    with pytest.raises(ValueError, match=r"not held in \.array_record shards.*--format array_record"):
        ClipShards(path=str(tmp_path), loading=FAST).load(batch=1)


def test_has_audio_is_one_byte_a_clip_read_as_bool_per_clip(tmp_path: Path) -> None:
    directory = write_clips(tmp_path / "clips")
    clips = every_clip(directory)
    assert clips["has_audio"].dtype == bool and clips["has_audio"].shape == (14,)
    assert clips["has_audio"].tolist() == [audible(int(c.split()[1])) for c in clips["caption"]]
    shard = directory / formats.shard_name("train", 0, 2, "array_record")
    from array_record.python.array_record_module import ArrayRecordReader

    reader = ArrayRecordReader(str(shard))
    first = unpack_dict_of_byte_arrays(reader.read([0])[0])
    reader.close()
    assert list(first) == ["frames", "audio", "has_audio", "caption", "source", "span"]
    assert first["has_audio"] == b"\x00"  # clip 0 stands in silence for a video without audio


def test_a_has_audio_byte_other_than_0_or_1_is_refused_naming_the_record(tmp_path: Path) -> None:
    def damage(record: bytes) -> bytes:
        return pack_dict_of_byte_arrays({**unpack_dict_of_byte_arrays(record), "has_audio": b"\x02"})

    directory = write_clips(tmp_path / "clips", edit=damage)
    with pytest.raises(ValueError, match=r"train-00000-of-00002\.array_record record 0: has_audio is b'\\x02'"):
        every_clip(directory)


@given(
    stop_at=st.integers(0, 7),
    counts=st.sampled_from([(1, 2), (2, 1), (2, 4), (4, 1), (1, 1), (4, 4)]),
    seed=st.integers(0, 20),
)
@settings(max_examples=8, deadline=None)
def test_a_stopped_clip_stream_and_its_validation_pass_resume_exactly(tmp_path_factory, stop_at, counts, seed) -> None:
    directory = write_clips(tmp_path_factory.mktemp("c") / "clips", shards=3, per_shard=5)
    data = ClipShards(path=str(directory), val_batches=2, seed=seed, loading=FAST).load(batch=4)
    assert data.records == 7  # 15 clips, the last 8 held out: every step past the first crosses an epoch
    assert_resume_exact(data.train, steps=7, stop_at=stop_at, count_before=counts[0], count_after=counts[1])
    assert_resume_exact(data.val, steps=2, stop_at=min(stop_at, 2), count_before=counts[0], count_after=counts[1])


def test_an_older_layout_holds_no_has_audio_where_silence_may_stand_in_for_a_missing_track(
    tmp_path: Path, caplog: pytest.LogCaptureFixture
) -> None:
    config = {"job": "decode-clips", "no_audio": "silence"}
    directory = write_clips(tmp_path / "clips", section=OLD_SECTION, config=config)
    with caplog.at_level(logging.WARNING):
        clips = every_clip(directory)
    assert "has_audio" not in clips and clips["audio"].shape == (14, 80)
    assert "do not say whether their video has an audio stream" in caplog.text and "--overwrite" in caplog.text
    (batch,), _ = read_global(ClipShards(path=str(directory), loading=FAST).load(batch=2).train, 1, 1)
    assert "has_audio" not in batch


def test_an_older_layout_whose_job_dropped_videos_without_audio_has_audio_all_true(tmp_path: Path) -> None:
    config = {"job": "decode-clips", "no_audio": "drop"}
    directory = write_clips(tmp_path / "clips", section=OLD_SECTION, config=config)
    assert every_clip(directory)["has_audio"].tolist() == [True] * 14
    (batch,), _ = read_global(ClipShards(path=str(directory), loading=FAST).load(batch=2).train, 1, 1)
    assert batch["has_audio"].dtype == bool and batch["has_audio"].tolist() == [True, True]


def test_has_audio_is_a_field_only_beside_audio() -> None:
    with pytest.raises(ValueError, match="only beside audio"):
        dataclasses.replace(SECTION, audio_rate=None, fields=("frames", "has_audio", "caption"))


@given(stop_at=st.integers(0, 8), counts=st.sampled_from([(1, 2), (2, 1), (2, 2)]), samples=st.integers(1, 16))
@settings(max_examples=5, deadline=None)
def test_a_ramped_clip_stream_resumes_exactly_across_its_stages(tmp_path_factory, stop_at, counts, samples) -> None:
    spec = ClipShards(path=str(write_clips(tmp_path_factory.mktemp("c") / "clips")), seed=2, loading=FAST)
    run = ramped(spec.load(batch=6), Ramp(start=2, increment=2, samples=samples))
    assert_resume_exact(run.train, steps=8, stop_at=stop_at, count_before=counts[0], count_after=counts[1])

"""Records parked in files by the step that made them: a shard staged from their references is the shard
staged from their bytes, and a parked file that changed under the job fails the shard, naming it."""

from __future__ import annotations

import random
import shutil
from pathlib import Path

import pytest

from dew.data.codec import pack_dict_of_byte_arrays
from dew.data.sections import ClipsSection
from dew.preprocess import files
from dew.preprocess.parked import ParkingFile
from dew.preprocess.shard_files import ShardFormat
from dew.preprocess.shards import stage_shard

FMT = ShardFormat(
    ext="array_record",
    section=ClipsSection(
        frames=2, frame_size=4, frame_rate=25.0, frame_encoding="raw", audio_rate=None, audio_dtype="float32",
        fields=("frames", "caption", "source", "span"),
    ),
)  # fmt: skip


def _records(video: int, clips: int) -> list[bytes]:
    rng = random.Random(video)
    return [
        pack_dict_of_byte_arrays(
            {"frames": rng.randbytes(96), "caption": b"c", "source": f"{video}.mp4".encode(), "span": bytes(16)}
        )
        for _ in range(clips)
    ]


def _staged_bytes(output: Path, records) -> bytes:
    staged = stage_shard(str(output), "train-00000-of-00001.array_record", FMT, records)
    try:
        return Path(staged.target).read_bytes()
    finally:
        shutil.rmtree(staged.work, ignore_errors=True)


def test_a_shard_of_parked_records_is_the_shard_of_their_bytes(tmp_path: Path) -> None:
    keyed, parked = [], []
    for video in range(3):
        parking = ParkingFile(str(tmp_path / "out"), f"video-{video}.clips")
        for clip, record in enumerate(_records(video, 4)):
            keyed.append(((video, clip), record))
            parked.append(((video, clip), parking.add(record)))
        parking.close()
    # Under the output's temporary directory, one file a video, unique per attempt.
    assert len(files.listing(str(tmp_path / "out" / files.TEMP_DIR))) == 3
    random.Random(0).shuffle(keyed)
    random.Random(1).shuffle(parked)
    assert _staged_bytes(tmp_path / "a", parked) == _staged_bytes(tmp_path / "b", keyed)


def test_a_discarded_parking_file_is_gone_and_an_unused_one_never_made(tmp_path: Path) -> None:
    parking = ParkingFile(str(tmp_path), "video-0.clips")
    parking.discard()  # nothing was added: no file, no directory
    assert not (tmp_path / files.TEMP_DIR).exists()
    parking = ParkingFile(str(tmp_path), "video-1.clips")
    parking.add(b"x" * 10)
    parking.discard()
    assert files.listing(str(tmp_path / files.TEMP_DIR)) == []


def test_a_parked_file_cut_under_the_job_fails_the_shard(tmp_path: Path) -> None:
    parking = ParkingFile(str(tmp_path / "out"), "video-0.clips")
    parked = [((0, clip), parking.add(record)) for clip, record in enumerate(_records(0, 3))]
    parking.close()
    path = Path(parked[0][1].path)
    path.write_bytes(path.read_bytes()[:-5])
    with pytest.raises(RuntimeError, match=r"video-0\.clips.*cut or replaced"):
        _staged_bytes(tmp_path / "a", parked)

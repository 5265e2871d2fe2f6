"""A spec's path may start with `~`: every reader opens it under the user's home, while the spec's
config keeps the path as written, so a saved config means the same under another home."""

from __future__ import annotations

from pathlib import Path

import numpy as np
import pytest

from dew.data import ArrayRecordImages, DataPartition, Loading, PackedTokens, TokenWindows, datasets
from tests.runtime.token_support import documents, write_corpus

FAST = Loading(workers=0, threads=2, read_buffer=4)


@pytest.fixture
def home(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> Path:
    monkeypatch.setenv("HOME", str(tmp_path))
    return tmp_path


def first_batch(spec, batch: int = 2) -> dict:
    stream = spec.load(batch=batch).train(DataPartition())
    try:
        return next(stream)
    finally:
        stream.close()


def same_batches(a: dict, b: dict) -> None:
    assert a.keys() == b.keys()
    for key in a:
        np.testing.assert_array_equal(np.asarray(a[key]), np.asarray(b[key]))


@pytest.mark.parametrize("kind", [TokenWindows, PackedTokens])
def test_token_readers_open_a_path_under_home(home: Path, kind) -> None:
    write_corpus(str(home / "corpus"), {"train": documents(60), "val": documents(8, seed=1)})
    given = kind(path="~/corpus", seq_len=8, loading=FAST)
    same_batches(first_batch(given), first_batch(kind(path=str(home / "corpus"), seq_len=8, loading=FAST)))
    assert given.path == "~/corpus" and given.to_config()["path"] == "~/corpus"
    assert datasets.from_config(given.to_config()) == given


def test_a_token_file_under_home_reads(home: Path) -> None:
    np.arange(1, 402, dtype=np.uint16).tofile(home / "x.bin")
    batch = first_batch(TokenWindows(path="~/x.bin", seq_len=10, loading=FAST, val_batches=0))
    assert batch["text"].shape == (2, 11)


def test_images_open_a_committed_directory_and_a_raw_set_under_home(home: Path) -> None:
    pytest.importorskip("array_record")
    from tests.runtime.image_support import records, write_committed, write_raw_set

    write_committed(str(home / "committed"), {"train": [records(4), records(4)]})
    write_raw_set(str(home / "raw"), [records(6)])
    for name in ("committed", "raw"):
        given = ArrayRecordImages(path=f"~/{name}", image_size=32, loading=FAST, val_batches=0)
        absolute = ArrayRecordImages(path=str(home / name), image_size=32, loading=FAST, val_batches=0)
        same_batches(first_batch(given), first_batch(absolute))
        assert given.to_config()["path"] == f"~/{name}"


def test_a_missing_path_under_home_is_named_as_given(home: Path) -> None:
    with pytest.raises(FileNotFoundError, match="~/nowhere"):
        TokenWindows(path="~/nowhere", seq_len=8, loading=FAST).load(batch=2)


def test_clip_shards_open_a_directory_under_home(home: Path) -> None:
    pytest.importorskip("array_record")
    from dew.data.video.clip_shards import ClipShards
    from tests.runtime.test_clip_shards import write_clips

    write_clips(home / "clips")
    given = ClipShards(path="~/clips", loading=FAST, val_batches=0)
    same_batches(first_batch(given), first_batch(ClipShards(path=str(home / "clips"), loading=FAST, val_batches=0)))


def test_a_video_folder_under_home_is_listed(home: Path) -> None:
    from dew.data.video.corpora import video_files

    (home / "vids" / "a").mkdir(parents=True)
    for name in ("a/1.mp4", "2.mp4"):
        (home / "vids" / name).write_bytes(b"")
    found = video_files("~/vids", (".mp4",), kind="LocalVideos")
    assert found == [(str(home / "vids" / "2.mp4"), "2.mp4"), (str(home / "vids" / "a" / "1.mp4"), "a/1.mp4")]


def test_a_parquet_table_under_home_reads(home: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    import pyarrow.parquet as pq

    from dew.data.rows import read_table

    pq.write_table(pa.table({"chosen": [[1, 2]], "rejected": [[3]]}), home / "pairs.parquet")
    assert read_table("~/pairs.parquet", ["chosen", "rejected"]).num_rows == 1
    with pytest.raises(FileNotFoundError, match=r"no parquet file at ~/nothing\.parquet"):
        read_table("~/nothing.parquet", ["chosen"])

"""ArrayRecordImages over committed and raw shards: pixels, captions, token ids, augmentation, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import ArrayRecordImages, DataPartition, Loading, datasets
from dew.data.images import pixels
from dew.data.order import record_rng
from tests.runtime import image_support as support
from tests.support import assert_resume_exact, read_global

FAST = Loading(workers=0, threads=2, read_buffer=8)


def spec(path: str, **fields) -> ArrayRecordImages:
    return ArrayRecordImages(path, image_size=fields.pop("image_size", 32), loading=FAST, **fields)


@pytest.fixture(scope="module")
def committed(tmp_path_factory) -> str:
    directory = str(tmp_path_factory.mktemp("committed"))
    keys = [f"key-{i}".encode() for i in range(16)]
    rows = support.records(16, key=keys)
    support.write_committed(directory, {"train": [rows[:10], rows[10:]]})
    return directory


def test_a_committed_directory_reads_as_square_rgb_with_captions_and_extras(committed) -> None:
    batches, _ = read_global(spec(committed, val_batches=0).load(batch=8).train, 1, 2)
    photos = support.photographs()
    for batch in batches:
        assert batch["image"].dtype == np.uint8 and batch["image"].shape == (8, 32, 32, 3)
        for row, key in enumerate(batch["key"]):
            i = int(key.decode().split("-")[1])
            assert batch["caption"][row] == f"photo {i} — é"
            # The centre square of the image scaled to 32 on its shorter side, drafted as a JPEG is.
            expected = pixels.square(pixels.decode(photos[i % len(photos)], size=32), 32)
            np.testing.assert_array_equal(batch["image"][row], expected)
    seen = sorted(k for b in batches for k in b["key"])
    assert seen == sorted(f"key-{i}".encode() for i in range(16))  # one epoch: every record once


def test_only_jpegs_of_checksum_verified_shards_take_the_opencv_path(committed, tmp_path, monkeypatch) -> None:
    taken: list[tuple[bool, bool]] = []  # (a JPEG, decoded by OpenCV) for every image offered to the fast path
    whole_jpeg = pixels.decode_whole_jpeg

    def spied(data: bytes, **options) -> np.ndarray | None:
        decoded = whole_jpeg(data, **options)
        taken.append((data.startswith(b"\xff\xd8"), decoded is not None))
        return decoded

    monkeypatch.setattr(pixels, "decode_whole_jpeg", spied)
    fast, _ = read_global(spec(committed, val_batches=0).load(batch=8).train, 1, 2)
    assert len(taken) >= 16 and all(jpeg == opencv for jpeg, opencv in taken)  # PNG and WebP went on to Pillow
    assert any(opencv for _, opencv in taken)
    taken.clear()
    monkeypatch.setenv("DEW_VERIFY", "0")  # nothing checks the shards, so nothing says their bytes are whole
    slow, _ = read_global(spec(committed, val_batches=0).load(batch=8).train, 1, 2)
    assert taken == []
    for a, b in zip(fast, slow, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
    monkeypatch.delenv("DEW_VERIFY")
    support.write_raw_set(str(tmp_path / "raw"), [support.records(8)])  # no checksum: Pillow reads it all
    read_global(spec(str(tmp_path / "raw"), val_batches=0).load(batch=8).train, 1, 1)
    assert taken == []


def test_validation_holds_out_whole_batches_and_a_val_split_is_read_instead(committed, tmp_path) -> None:
    data = spec(committed, val_batches=1).load(batch=4)
    assert data.records == 12
    (val,) = list(data.val(DataPartition()))
    assert [k.decode() for k in val["key"]] == [f"key-{i}" for i in range(12, 16)]
    rows = support.records(8)
    support.write_committed(str(tmp_path), {"train": [rows[:6]], "val": [rows[6:]]})
    data = spec(str(tmp_path), val_batches=None).load(batch=2)
    assert data.records == 6 and len(list(data.val(DataPartition()))) == 1


def test_a_raw_shard_set_reads_its_img2dataset_fields(tmp_path) -> None:
    rows = support.records(9, image="jpg", caption="txt", key=[b"k%d" % i for i in range(9)])
    support.write_raw_set(str(tmp_path / "root" / "set-a"), [rows[:5], rows[5:]])
    support.write_raw_set(str(tmp_path / "root" / "set-b"), [rows[:3]])
    alone = spec(str(tmp_path / "root" / "set-a"), val_batches=0).load(batch=3)
    assert alone.records == 9
    both = spec(str(tmp_path / "root"), shards=("set-a", "set-b"), val_batches=0).load(batch=4)
    assert both.records == 12
    (batch,), _ = read_global(both.train, 1, 1)
    assert set(batch) == {"image", "caption", "key"} and batch["image"].shape == (4, 32, 32, 3)


def test_a_committed_directory_named_in_shards_is_refused_not_read_with_its_val_split(tmp_path) -> None:
    rows = support.records(6)
    support.write_committed(str(tmp_path / "root" / "done"), {"train": [rows[:4]], "val": [rows[4:]]})
    with pytest.raises(ValueError, match=r"done is a committed images directory .*read it as ArrayRecordImages\("):
        spec(str(tmp_path / "root"), shards=("done",), val_batches=0).load(batch=2)


def test_records_without_captions_refuse_a_tokenizer(tmp_path) -> None:
    support.write_raw_set(str(tmp_path), [support.records(4, image="jpg", caption=None)])
    images = spec(str(tmp_path), val_batches=0)
    (batch,), _ = read_global(images.load(batch=2).train, 1, 1)
    assert set(batch) == {"image"}
    with pytest.raises(ValueError, match="carries no captions"):
        images.load(batch=2, tokenize=lambda captions: {})


def test_a_split_the_directory_lacks_is_refused_naming_the_directory_and_its_splits(committed) -> None:
    with pytest.raises(ValueError, match=rf"{committed} has no split 'test'; its splits: train: give split="):
        spec(committed, split="test").load(batch=2)


def test_a_malformed_record_is_refused_naming_its_shard_and_record(tmp_path) -> None:
    good = support.records(3)
    from dew.data.codec import pack_dict_of_byte_arrays

    truncated = pack_dict_of_byte_arrays(good[1])[:-9]
    support.write_raw_set(str(tmp_path / "a"), [[pack_dict_of_byte_arrays(good[0]), truncated]])
    data = spec(str(tmp_path / "a"), val_batches=0).load(batch=2)
    with pytest.raises(ValueError, match=r"00000\.array_record record 1: .*truncated"):
        read_global(data.train, 1, 1)
    broken = [good[0], {"image": b"\xff\xd8 not a jpeg", "caption": b"x"}]
    support.write_raw_set(str(tmp_path / "b"), [broken])
    data = spec(str(tmp_path / "b"), val_batches=0).load(batch=2)
    with pytest.raises(ValueError, match=r"00000\.array_record record 1: the image cannot be decoded"):
        read_global(data.train, 1, 1)


def test_a_shard_rewritten_after_its_commit_is_refused(committed, tmp_path) -> None:
    import shutil

    copy = str(tmp_path / "copy")
    shutil.copytree(committed, copy)
    with open(f"{copy}/train-00001-of-00002.array_record", "ab") as f:
        f.write(b"extra")
    with pytest.raises(ValueError, match=r"train-00001-of-00002\.array_record holds .* bytes but meta\.json records"):
        spec(copy).load(batch=2)


def test_captions_go_to_the_tokenizer_a_batch_at_a_time(committed) -> None:
    calls = []

    def tokenize(captions):
        calls.append(len(captions))
        ids = np.array([[len(c), 1] for c in captions], dtype=np.int32)
        return {"input_ids": ids, "attention_mask": np.ones_like(ids)}

    (batch,), _ = read_global(spec(committed, val_batches=0).load(batch=4, tokenize=tokenize).train, 1, 1)
    assert calls and set(calls) == {4}  # one call a batch (the stream reads ahead a few)
    assert batch["text"]["input_ids"][:, 0].tolist() == [len(c) for c in batch["caption"]]


def test_stored_caption_ids_are_read_and_another_tokenizer_is_refused_by_name(tmp_path) -> None:
    rows = support.records(6)
    for i, row in enumerate(rows):
        row["input_ids"] = np.arange(i, i + 5, dtype="<i4").tobytes()
        row["attention_mask"] = np.array([1, 1, 1, 0, 0], dtype="<i4").tobytes()
    support.write_committed(
        str(tmp_path), {"train": [rows]}, caption_tokenizer="tiny-clip", caption_tokenizer_hash="h", caption_length=5
    )
    images = spec(str(tmp_path), val_batches=0)
    (batch,), _ = read_global(images.load(batch=3).train, 1, 1)
    firsts = batch["text"]["input_ids"][:, 0].tolist()
    assert batch["text"]["input_ids"].dtype == np.int32 and batch["text"]["input_ids"].shape == (3, 5)
    assert [int(c.split()[1]) for c in batch["caption"]] == firsts and "input_ids" not in batch

    class Named:
        context_length = 5  # the stored length: the stored ids are what it would give

        def __init__(self, modelname):
            self.modelname = modelname

        def __call__(self, captions):
            raise AssertionError("stored ids are not tokenized again")

    read_global(images.load(batch=3, tokenize=Named("tiny-clip")).train, 1, 1)
    with pytest.raises(ValueError, match="tokenized offline by 'tiny-clip', and tokenize= is 'openai/clip"):
        images.load(batch=3, tokenize=Named("openai/clip-vit-large-patch14"))


def test_augmentation_is_a_function_of_the_seed_and_the_global_record(committed) -> None:
    augmented = spec(committed, val_batches=0, flip=True, random_crop=True, crop_scale=1.5, seed=3)
    plain = spec(committed, val_batches=0, crop_scale=1.5, seed=3)
    first, _ = read_global(augmented.load(batch=8).train, 1, 4)
    again, _ = read_global(augmented.load(batch=8).train, 2, 4)
    centred, _ = read_global(plain.load(batch=8).train, 1, 4)
    for a, b in zip(first, again, strict=True):
        np.testing.assert_array_equal(a["image"], b["image"])
    differs = sum(
        not np.array_equal(a["image"][r], c["image"][r]) for a, c in zip(first, centred, strict=True) for r in range(8)
    )
    assert differs > 16  # most of the 32 records are cropped off-centre or mirrored
    # The draws are numpy's Philox keyed by (seed, index): a record's rng is reproducible on its own.
    assert record_rng(3, 5).random() == record_rng(3, 5).random() != record_rng(3, 6).random()


def test_validation_is_never_augmented(committed) -> None:
    plain = spec(committed, val_batches=1).load(batch=4)
    augmented = spec(committed, val_batches=1, flip=True, random_crop=True, crop_scale=1.5).load(batch=4)
    (want,), (got,) = list(plain.val(DataPartition())), list(augmented.val(DataPartition()))
    centre = spec(committed, val_batches=1, crop_scale=1.5).load(batch=4)
    (centred,) = list(centre.val(DataPartition()))
    np.testing.assert_array_equal(got["image"], centred["image"])
    assert want["caption"] == got["caption"]


@given(stop_at=st.integers(0, 5), shares=st.sampled_from([(1, 2), (2, 4), (4, 1)]))
@settings(max_examples=6, deadline=None)
def test_an_augmented_stream_resumes_exactly_on_another_share_count(committed, stop_at, shares) -> None:
    images = spec(committed, val_batches=0, flip=True, random_crop=True, crop_scale=1.25, seed=11)
    before, after = shares
    assert_resume_exact(images.load(batch=4).train, steps=6, stop_at=stop_at, count_before=before, count_after=after)


def test_a_run_may_change_image_size_and_keep_its_place(committed) -> None:
    _, state = read_global(spec(committed, val_batches=0).load(batch=4).train, 1, 2)
    (small,), _ = read_global(spec(committed, val_batches=0).load(batch=4).train, 1, 1, state)
    (large,), _ = read_global(spec(committed, val_batches=0, image_size=48).load(batch=4).train, 1, 1, state)
    assert small["caption"] == large["caption"] and large["image"].shape == (4, 48, 48, 3)


def test_the_spec_round_trips_and_refuses_bad_fields(committed) -> None:
    images = spec(committed, shards=("a", "b"), flip=True, crop_scale=1.25, seed=2)
    assert datasets.from_config(json.loads(json.dumps(images.to_config()))) == images
    with pytest.raises(ValueError, match="crop_scale"):
        spec(committed, crop_scale=0.5)
    with pytest.raises(ValueError, match="image_size"):
        spec(committed, image_size=0)
    with pytest.raises(ValueError, match="path is unset"):
        ArrayRecordImages().load(batch=2)

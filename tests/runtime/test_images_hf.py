"""HFImages over a save_to_disk directory: stored bytes from Arrow, captions, validation, resume."""

from __future__ import annotations

import json

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import DataPartition, HFImages, Loading, datasets
from dew.data.images import pixels
from tests.runtime import image_support as support
from tests.support import assert_resume_exact, read_global

hf = pytest.importorskip("datasets")
FAST = Loading(workers=0, threads=2, read_buffer=8)


@pytest.fixture(scope="module")
def saved(tmp_path_factory) -> str:
    photos = support.photographs()
    table = hf.Dataset.from_dict(
        {"image": [{"bytes": photos[i % 8], "path": None} for i in range(12)], "text": [f"row {i}" for i in range(12)]},
        features=hf.Features({"image": hf.Image(), "text": hf.Value("string")}),
    )
    directory = str(tmp_path_factory.mktemp("hf"))
    hf.DatasetDict({"train": table, "test": table.select(range(4))}).save_to_disk(directory)
    return directory


def test_rows_read_their_stored_bytes_captioned_from_text(saved, monkeypatch) -> None:
    # Nothing may decode to PIL on the way: the Image feature's decoder is never called.
    monkeypatch.setattr(hf.Image, "decode_example", lambda *a, **k: pytest.fail("decoded through PIL"))
    data = HFImages(name=saved, image_size=20, val_batches=1, loading=FAST).load(batch=4)
    assert data.records == 8
    batches, _ = read_global(data.train, 1, 2)
    photos = support.photographs()
    for batch in batches:
        assert batch["image"].shape == (4, 20, 20, 3) and set(batch) == {"image", "caption"}
        for row, caption in enumerate(batch["caption"]):
            i = int(caption.split()[1])
            expected = pixels.square(pixels.decode(photos[i % 8], size=20), 20)
            np.testing.assert_array_equal(batch["image"][row], expected)
    (held,) = list(data.val(DataPartition()))
    assert held["caption"] == [f"row {i}" for i in range(8, 12)]


def test_a_val_split_and_a_caption_column_are_named(saved) -> None:
    data = HFImages(name=saved, val_split="test", caption_column="text", image_size=16, loading=FAST).load(batch=2)
    assert data.records == 12 and len(list(data.val(DataPartition()))) == 2
    with pytest.raises(ValueError, match="has no column 'caption'"):
        HFImages(name=saved, caption_column="caption", loading=FAST).load(batch=2)


def test_a_dataset_without_captions_refuses_a_tokenizer(tmp_path) -> None:
    photos = support.photographs()
    table = hf.Dataset.from_dict({"image": [{"bytes": p, "path": None} for p in photos]})
    table = table.cast_column("image", hf.Image())
    table.save_to_disk(str(tmp_path))
    images = HFImages(name=str(tmp_path), val_batches=0, image_size=16, loading=FAST)
    (batch,), _ = read_global(images.load(batch=4).train, 1, 1)
    assert set(batch) == {"image"}
    with pytest.raises(ValueError, match="carries no captions"):
        images.load(batch=4, tokenize=lambda captions: {})


@given(stop_at=st.integers(0, 4), shares=st.sampled_from([(1, 2), (2, 4)]))
@settings(max_examples=4, deadline=None)
def test_an_augmented_hf_stream_resumes_exactly(saved, stop_at, shares) -> None:
    images = HFImages(
        name=saved, image_size=16, flip=True, random_crop=True, crop_scale=1.5, val_batches=0, seed=4, loading=FAST
    )
    data = images.load(batch=4)
    assert_resume_exact(data.train, steps=4, stop_at=stop_at, count_before=shares[0], count_after=shares[1])


def test_the_spec_round_trips(saved) -> None:
    images = HFImages(name=saved, split="train", caption_column="text", image_size=64, flip=True)
    assert datasets.from_config(json.loads(json.dumps(images.to_config()))) == images

"""The named corpora over tiny fake roots with the bucket's shard names, and OxfordFlowers."""

from __future__ import annotations

import json
import os

import numpy as np
import pytest
from hypothesis import given, settings
from hypothesis import strategies as st

from dew.data import CC3M, CombinedMsml612, DataPartition, DiffusionDB, Loading, OxfordFlowers, Ramp, datasets, ramped
from dew.data.images import corpora
from dew.data.images.flowers import FLOWER_NAMES
from tests.runtime import image_support as support
from tests.support import assert_resume_exact, read_global

FAST = Loading(workers=0, threads=2, read_buffer=8)


def fake_set(root: str, shard_set: corpora.ShardSet, *, skip: tuple[int, ...] = (), tag: str = "") -> None:
    """One record a shard under the set's real shard names, captioned with the set's tag."""
    count = shard_set.shards or 3
    rows = support.records(count, image="jpg", caption="txt", key=[f"{tag}{i}".encode() for i in range(count)])
    present = [i for i in range(count) if i not in shard_set.missing + skip]
    support.write_raw_set(
        os.path.join(root, shard_set.directory),
        [[rows[i]] for i in present],
        [f"{i:05d}.array_record" for i in present],
    )


def test_cc3m_reads_its_49_shards_without_the_known_missing_one(tmp_path) -> None:
    fake_set(str(tmp_path), corpora.CC3M_SET)
    data = CC3M(root=str(tmp_path), image_size=16, val_batches=0, loading=FAST).load(batch=7)
    assert data.records == 49
    (batch,), _ = read_global(data.train, 1, 1)
    assert batch["image"].shape == (7, 16, 16, 3) and len(batch["caption"]) == 7


def test_a_root_missing_an_expected_shard_is_refused_by_its_name(tmp_path) -> None:
    fake_set(str(tmp_path), corpora.DIFFUSIONDB, skip=(17,))
    with pytest.raises(FileNotFoundError, match=r"arrayrecord2/diffusiondb lacks shard 00017\.array_record of its 31"):
        DiffusionDB(root=str(tmp_path), loading=FAST).load(batch=2)
    with pytest.raises(FileNotFoundError, match="no shard directory"):
        CC3M(root=str(tmp_path / "elsewhere"), loading=FAST).load(batch=2)


@pytest.fixture(scope="module")
def msml612(tmp_path_factory) -> str:
    root = str(tmp_path_factory.mktemp("msml612"))
    for shard_set, tag in zip(CombinedMsml612.SETS, "LPDC", strict=True):
        fake_set(root, shard_set, tag=tag)
    return root


def test_a_combined_corpus_mixes_its_sets_at_their_weights(msml612) -> None:
    combined = CombinedMsml612(root=msml612, weights=(1, 1, 1, 1), image_size=16, val_batches=0, loading=FAST)
    data = combined.load(batch=8)
    batches, _ = read_global(data.train, 1, 4)
    tags = [key[:1].decode() for b in batches for key in b["key"]]
    assert {t: tags.count(t) for t in "LPDC"} == {"L": 8, "P": 8, "D": 8, "C": 8}
    # By default each set weighs its record count, as one corpus of all of them would read.
    by_count = CombinedMsml612(root=msml612, image_size=16, val_batches=0, loading=FAST).load(batch=8)
    assert by_count.records == 228 + 569 + 31 + 49


@given(stop_at=st.integers(0, 4), shares=st.sampled_from([(1, 2), (2, 1), (4, 2)]))
@settings(max_examples=5, deadline=None)
def test_a_combined_corpus_resumes_exactly_on_another_share_count(msml612, stop_at, shares) -> None:
    combined = CombinedMsml612(
        root=msml612, weights=(3, 1, 2, 2), image_size=16, flip=True, random_crop=True, crop_scale=1.5,
        val_batches=1, seed=5, loading=FAST,
    )  # fmt: skip
    data = combined.load(batch=4)
    assert_resume_exact(data.train, steps=5, stop_at=stop_at, count_before=shares[0], count_after=shares[1])
    (held,) = list(data.val(DataPartition()))
    assert held["image"].shape == (4, 16, 16, 3)
    run = ramped(data, Ramp(start=2, increment=2, samples=6))  # two steps of 2, so at most 2 shares, then 4
    before, after = min(shares[0], 2), min(shares[1], 2)
    assert_resume_exact(run.train, steps=5, stop_at=stop_at, count_before=before, count_after=after)


@given(stop_at=st.integers(0, 3), shares=st.sampled_from([(1, 2), (2, 1), (4, 2)]))
@settings(max_examples=3, deadline=None)
def test_a_combined_corpus_validation_pass_resumes_exactly_on_another_share_count(msml612, stop_at, shares) -> None:
    combined = CombinedMsml612(root=msml612, weights=(3, 1, 2, 2), image_size=16, val_batches=3, seed=5, loading=FAST)
    data = combined.load(batch=4)
    with data.val(DataPartition()) as one_pass:
        steps = sum(1 for _ in one_pass)
    assert steps == 3
    assert_resume_exact(data.val, steps=steps, stop_at=stop_at, count_before=shares[0], count_after=shares[1])


def test_every_named_corpus_round_trips_with_the_bucket_as_its_default_root() -> None:
    for kind in ("cc3m", "cc12m", "diffusiondb", "laion2b_aesthetic", "laion12m_coco", "combined_30m"):
        spec = datasets[kind](image_size=64, seed=1)
        assert spec.root == "gs://msml612-diffusion-data"
        assert datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec
    with pytest.raises(ValueError, match="gives 2 weights for 4 shard sets"):
        CombinedMsml612(weights=(1, 2))


def test_oxford_flowers_captions_each_photograph_from_its_class(tmp_path) -> None:
    labels = [b"1", b"102", b"sunflower", b"bird_of_paradise", b"77", b"51"]
    rows = support.records(6, label=labels)
    support.write_committed(str(tmp_path), {"train": [rows[:4]], "val": [rows[4:]]})
    flowers = OxfordFlowers(path=str(tmp_path), image_size=24, val_batches=None, loading=FAST)
    data = flowers.load(batch=2)
    batches, _ = read_global(data.train, 1, 2)
    captions = sorted(c for b in batches for c in b["caption"])
    assert captions == sorted(
        f"a photo of a {name}, a type of flower" for name in ("pink primrose", "blackberry lily", "sunflower",
                                                            "bird of paradise")
    )  # fmt: skip
    (val,) = list(data.val(DataPartition()))
    assert val["caption"] == ["a photo of a passion flower, a type of flower", "a photo of a petunia, a type of flower"]
    assert len(FLOWER_NAMES) == 102 and len(set(FLOWER_NAMES)) == 102
    assert val["image"].dtype == np.uint8 and val["image"].shape == (2, 24, 24, 3)
    tokenized = flowers.load(batch=2, tokenize=lambda c: {"input_ids": np.zeros((len(c), 3), np.int32)})
    (batch,), _ = read_global(tokenized.train, 1, 1)
    assert batch["text"]["input_ids"].shape == (2, 3)


def test_oxford_flowers_drops_token_ids_stored_for_the_captions_it_replaces(tmp_path) -> None:
    rows = support.records(4, label=[b"1", b"2", b"3", b"4"])
    for row in rows:
        row["input_ids"] = np.arange(5, dtype="<i4").tobytes()
        row["attention_mask"] = np.ones(5, dtype="<i4").tobytes()
    support.write_committed(
        str(tmp_path), {"train": [rows]}, caption_tokenizer="tiny-clip", caption_tokenizer_hash="h", caption_length=5
    )
    flowers = OxfordFlowers(path=str(tmp_path), image_size=24, val_batches=0, loading=FAST)
    (batch,), _ = read_global(flowers.load(batch=2).train, 1, 1)
    assert set(batch) == {"image", "caption"}
    tokenize = lambda c: {"input_ids": np.full((len(c), 3), 7, np.int32)}  # noqa: E731
    (batch,), _ = read_global(flowers.load(batch=2, tokenize=tokenize).train, 1, 1)
    assert set(batch) == {"image", "caption", "text"} and batch["text"]["input_ids"].tolist() == [[7] * 3] * 2


def test_oxford_flowers_refuses_records_without_a_class(tmp_path) -> None:
    support.write_committed(str(tmp_path / "plain"), {"train": [support.records(4)]})
    with pytest.raises(ValueError, match="carry no `label` field"):
        OxfordFlowers(path=str(tmp_path / "plain"), val_batches=0, loading=FAST).load(batch=2)
    support.write_committed(str(tmp_path / "bad"), {"train": [support.records(4, label=[b"0", b"1", b"2", b"3"])]})
    data = OxfordFlowers(path=str(tmp_path / "bad"), val_batches=0, loading=FAST).load(batch=4)
    with pytest.raises(ValueError, match="record 0: label 0 is not an Oxford Flowers class number"):
        read_global(data.train, 1, 1)
    with pytest.raises(ValueError, match="caption_template"):
        OxfordFlowers(caption_template="a {kind}")


def test_oxford_flowers_reads_its_default_directory_or_says_how_to_prepare_it(tmp_path, monkeypatch) -> None:
    monkeypatch.setenv("DEW_DATA_DIR", str(tmp_path))
    expected = str(tmp_path / "oxford_flowers102")
    with pytest.raises(FileNotFoundError) as missing:
        OxfordFlowers(image_size=128).load(batch=32)
    message = str(missing.value)
    assert f"no prepared Oxford Flowers 102 at {expected} (path is unset: $DEW_DATA_DIR/oxford_flowers102" in message
    assert f"dew-preprocess images --input <the ImageFolder copy> --output {expected} --val_fraction 0.05\n" in message
    with pytest.raises(FileNotFoundError, match=f"no prepared Oxford Flowers 102 at {tmp_path}/elsewhere: "):
        OxfordFlowers(path=str(tmp_path / "elsewhere")).load(batch=2)

    rows = support.records(6, label=[b"1", b"2", b"3", b"4", b"5", b"6"])
    support.write_committed(expected, {"train": [rows]})
    spec = OxfordFlowers(image_size=24, val_batches=0, loading=FAST)
    assert spec.path is None and datasets.from_config(json.loads(json.dumps(spec.to_config()))) == spec
    (batch,), _ = read_global(spec.load(batch=2).train, 1, 1)
    assert batch["image"].shape == (2, 24, 24, 3) and all(c.startswith("a photo of a ") for c in batch["caption"])
    monkeypatch.delenv("DEW_DATA_DIR")
    monkeypatch.setenv("HOME", str(tmp_path / "home"))
    with pytest.raises(FileNotFoundError, match=f"at {tmp_path}/home/dew_datasets/oxford_flowers102 "):
        OxfordFlowers().load(batch=2)

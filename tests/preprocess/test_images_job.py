"""The images and caption-tokenize jobs end to end on DirectRunner: real photographs and broken ones, every
input layout, the books, determinism across workers and crashes, and the records read back with the runtime's codec.
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import pytest

from dew.data import formats
from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.images import pixels
from dew.pipelines import images_job
from dew.preprocess.images import ImagesPlan
from tests.preprocess.photos import MAX_PIXELS, bad_images, good_images

IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def run_images(output: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    return images_job.main(["--output", str(output), *flags, *runner])


def read_records(directory: Path, split: str = "train") -> list[dict[str, bytes]]:
    """Every record of a split in shard order, through ArrayRecordReader (or pyarrow) and dew.data.codec."""
    from array_record.python.array_record_module import ArrayRecordReader

    meta = formats.read_meta(str(directory), kind="images")
    out = []
    for shard in meta.shards(split):
        formats.verify_shard(str(directory), shard, checksum=True)
        path = str(directory / shard.name)
        if shard.name.endswith(".parquet"):
            import pyarrow.parquet as pq

            rows = pq.read_table(path).to_pylist()
            out += [{k: row[k] for k in meta.section.fields} for row in rows]
            continue
        reader = ArrayRecordReader(path)
        try:
            records = reader.read(0, reader.num_records()) if reader.num_records() else []
        finally:
            reader.close()
        out += [unpack_dict_of_byte_arrays(r, f"{shard.name} record {i}") for i, r in enumerate(records)]
    return out


def listing(directory: Path) -> dict[str, str]:
    return {p.name: formats.sha256_file(str(p)) for p in sorted(directory.iterdir()) if p.is_file()}


@pytest.fixture
def image_folder(tmp_path: Path) -> Path:
    """An ImageFolder tree: good photographs in two classes, every kind of bad image in a third, one duplicate."""
    root = tmp_path / "folder"
    good = list(good_images().items())
    for i, (name, data) in enumerate(good):
        (root / ("cat" if i % 2 else "space")).mkdir(parents=True, exist_ok=True)
        (root / ("cat" if i % 2 else "space") / name).write_bytes(data)
    (root / "misc").mkdir()
    for name, (data, _) in bad_images().items():
        (root / "misc" / name).write_bytes(data)
    shutil.copy(root / "space" / "astronaut.jpg", root / "space" / "zz-astronaut.jpg")  # sorts after: dropped
    return root


def test_every_bad_image_is_dropped_for_its_reason_and_good_ones_kept() -> None:
    plan = ImagesPlan(output="unused", rules=pixels.ImageRules(max_pixels=MAX_PIXELS), size=64, encoding="png")
    for name, data in good_images().items():
        assert pixels.decode(plan.image_bytes(data)).shape == (64, 64, 3), name
    for name, (data, reason) in bad_images().items():
        with pytest.raises(pixels.ImageRejected) as rejected:
            plan.image_bytes(data)
        assert rejected.value.reason == reason, name
    assert sorted({r for _, r in bad_images().values()}) == sorted(pixels.REASONS)


@pytest.mark.beam
def test_image_folder_to_a_committed_directory_whose_books_balance(image_folder: Path, tmp_path: Path) -> None:
    out = tmp_path / "out"
    found = run_images(
        out,
        *("--input", str(image_folder), "--caption_template", "a photo of a {label}", "--size", "64"),
        *("--max_pixels", str(MAX_PIXELS), "--dedupe", "--val_fraction", "0.3", "--num_shards", "2"),
    )
    meta = formats.read_meta(str(out), kind="images")
    section = meta.section
    assert (section.encoding, section.resize, section.size, section.fields) == (
        "jpeg",
        "center_crop",
        64,
        ("image", "caption", "label"),
    )
    assert [s.name for s in meta.shards("train")] == [f"train-0000{i}-of-00002.array_record" for i in range(2)]
    records = read_records(out, "train") + read_records(out, "val")
    assert len(records) == len(good_images())
    for record in records:
        assert list(record) == ["image", "caption", "label"]
        assert record["caption"] == b"a photo of a " + record["label"]
        assert pixels.decode(record["image"]).shape == (64, 64, 3)
    assert sorted(r["label"] for r in records) == [b"cat"] * 3 + [b"space"] * 4

    stats = json.loads((out / "stats.json").read_text())
    want = dict(collections.Counter(reason for _, reason in bad_images().values())) | {"duplicate": 1}
    assert {k: v for k, v in stats["dropped"].items() if v} == want
    assert stats["images_in"] == stats["images_written"] + sum(stats["dropped"].values()) == found["images_in"] == 16
    assert found["images_encoded"] == 8 and found["too_small"] == 1
    assert (out / "train.pieces.npz").exists() and not (out / ".dew-tmp").exists()

"""The images and caption-tokenize jobs end to end on DirectRunner: real photographs and broken ones, every
input layout, the books, determinism across workers and crashes, and the records read back with the runtime's codec.
"""

from __future__ import annotations

import collections
import json
import shutil
from pathlib import Path

import numpy as np
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


@pytest.fixture(scope="module")
def caption_tokenizer(tmp_path_factory: pytest.TempPathFactory) -> str:
    """A CLIP-shaped BPE trained here: byte-level, <bos> caption <eos>, a pad token, no stated length."""
    from tokenizers import Tokenizer, decoders, models, pre_tokenizers, processors, trainers
    from transformers import PreTrainedTokenizerFast

    from tests.preprocess.corpora import topics

    tokenizer = Tokenizer(models.BPE(unk_token="<unk>"))
    tokenizer.pre_tokenizer = pre_tokenizers.ByteLevel(add_prefix_space=False)
    tokenizer.decoder = decoders.ByteLevel()
    special = ["<unk>", "<bos>", "<eos>", "<pad>"]
    trainer = trainers.BpeTrainer(
        vocab_size=400, special_tokens=special, initial_alphabet=pre_tokenizers.ByteLevel.alphabet()
    )
    tokenizer.train_from_iterator(topics(80), trainer=trainer)
    tokenizer.post_processor = processors.TemplateProcessing(
        single="<bos> $A <eos>", special_tokens=[("<bos>", 1), ("<eos>", 2)]
    )
    directory = tmp_path_factory.mktemp("caption-tokenizer")
    PreTrainedTokenizerFast(
        tokenizer_object=tokenizer, unk_token="<unk>", bos_token="<bos>", eos_token="<eos>", pad_token="<pad>"
    ).save_pretrained(directory)
    return str(directory)


@pytest.mark.beam
def test_caption_tokenize_copies_images_and_adds_ids_the_tokenizer_decodes(
    image_folder: Path, tmp_path: Path, caption_tokenizer: str
) -> None:
    from dew.data.text import HFTokenizer
    from dew.pipelines import caption_tokenize_job

    images = tmp_path / "images"
    run_images(images, "--input", str(image_folder), "--size", "32", "--encoding", "png", "--val_fraction", "0.3")
    out = tmp_path / "tokenized"
    flags = ["--tokenizer", caption_tokenizer, "--batch_size", "3", *IN_MEMORY]
    found = caption_tokenize_job.main(["--input", str(images), "--output", str(out), *flags])
    tokenizer = HFTokenizer(caption_tokenizer)
    meta = formats.read_meta(str(out), kind="images")
    section = meta.section
    assert section.fields == ("image", "caption", "label", "input_ids", "attention_mask")
    assert (section.caption_tokenizer, section.caption_tokenizer_hash, section.caption_length) == (
        caption_tokenizer,
        tokenizer.fingerprint(),
        77,
    )
    assert found["captions_tokenized"] == sum(s.records for shards in meta.splits.values() for s in shards) == 9
    for split in meta.splits:
        before, after = read_records(images, split), read_records(out, split)
        assert [{k: r[k] for k in ("image", "caption", "label")} for r in after] == before
        for record in after:
            ids = np.frombuffer(record["input_ids"], dtype="<i4")
            mask = np.frombuffer(record["attention_mask"], dtype="<i4")
            assert len(ids) == len(mask) == 77
            real = ids[mask == 1].tolist()
            assert real[0] == tokenizer.bos_id and real[-1] == tokenizer.eos_id
            assert tokenizer.tokenizer.decode(real, skip_special_tokens=True) == record["caption"].decode()
            assert set(ids[mask == 0].tolist()) == {tokenizer.tokenizer.pad_token_id}

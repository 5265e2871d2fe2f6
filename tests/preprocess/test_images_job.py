"""The images and caption-tokenize jobs end to end on DirectRunner: real photographs and broken ones, every
input layout, the books, determinism across workers and crashes, and the records read back with the runtime's codec.
"""

from __future__ import annotations

import collections
import gzip
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.data.codec import unpack_dict_of_byte_arrays
from dew.data.images import pixels
from dew.pipelines import images_job
from dew.pipelines.flags import UsageError
from dew.preprocess.write_images import ImagesPlan
from tests.preprocess.photos import MAX_PIXELS, bad_images, good_images
from tests.support import inspect_text, run_preprocess

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


def compressed(parts: list[bytes], suffix: str) -> tuple[bytes, int]:
    """`parts` as one gzip member (.gz) or zstd frame (.zst, .zstd) each, and the offset of the last one:
    a cut past it is a cut inside the last member or frame, which the reader must count as damage."""
    import zstandard

    blobs = [gzip.compress(p, mtime=0) if suffix == ".gz" else zstandard.ZstdCompressor().compress(p) for p in parts]
    return b"".join(blobs), sum(map(len, blobs[:-1]))


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
    # Every reason but the encoder's (tests/preprocess/test_images_unencodable.py): a 64 px square always encodes.
    assert sorted({r for _, r in bad_images().values()}) == sorted(set(pixels.REASONS) - {pixels.UNENCODABLE})


@pytest.mark.parametrize(
    ("caption", "score", "kept"),
    [
        ("a cat", 6.5, (b"a cat", b"6.5")),
        (b"a cat", True, (b"a cat", b"True")),
        (5, 1, None),  # was stored as b"5"
        (["a", "b"], 1, None),  # was stored as b"['a', 'b']", Python's spelling of a list
        ({"en": "a cat"}, 1, None),
        ("a cat", [1, 2], None),
        ("a cat", {"x": 1}, None),
    ],
)
def test_a_caption_that_is_not_text_or_an_extra_field_that_is_a_container_is_missing_field(
    caption: object, score: object, kept: tuple[bytes, bytes] | None
) -> None:
    """A caption is text, as tokenize's text field is; an extra field may be a scalar column (a score, a
    flag) written as its text, but a list or dict has no text but Python's repr, which no reader parses."""
    from dew.preprocess.image_reading import MISSING_FIELD, ImageReadOptions, ReadSource

    reader = ReadSource(ImageReadOptions(extra_fields=("score",)))
    image, fields, reason = reader._row({"image": b"\xff\xd8", "caption": caption, "score": score}, "")
    if kept is None:
        assert (image, fields, reason) == (None, {}, MISSING_FIELD)
    else:
        assert reason is None and (fields["caption"], fields["score"]) == kept


def test_a_byte_order_mark_is_no_part_of_a_row_file_or_a_sidecar_caption(tmp_path: Path) -> None:
    """Windows tools start text exports with a UTF-8 byte order mark: it dropped a jsonl's first row as
    malformed_json, began a sidecar caption with U+FEFF, and renamed a csv's first column to '\ufeffurl'."""
    from dew.preprocess.image_reading import ImageReadOptions, ReadSource
    from dew.preprocess.image_sources import Source
    from dew.preprocess.url_reading import _ReadUrlSource

    bom = b"\xef\xbb\xbf"
    rows = tmp_path / "rows.jsonl"
    rows.write_bytes(bom + b'{"image": "a.jpg", "caption": "one"}\n{"image": "b.jpg", "caption": "two"}\n')
    read = ReadSource(ImageReadOptions())
    found = list(read._jsonl_rows(Source(index=0, kind="jsonl", path=str(rows), name=rows.name)))
    assert [(row, values["caption"], reason) for row, values, reason in found] == [(0, "one", None), (1, "two", None)]

    (tmp_path / "cat.jpg").write_bytes(good_images()["astronaut.jpg"])
    (tmp_path / "cat.txt").write_bytes(bom + "a café cat\n".encode())
    sidecar = ReadSource(ImageReadOptions(sidecar=True))
    _, fields, reason = sidecar._image_file(Source(index=0, kind="image", path=str(tmp_path / "cat.jpg"), name="c"))
    assert reason is None and fields["caption"] == "a café cat".encode()

    urls = tmp_path / "urls.csv"
    urls.write_bytes(bom + b"url,caption\nhttp://example.com/a.jpg,one\n")
    got = list(
        _ReadUrlSource(ImageReadOptions(image_field="url"))._rows(Source(index=0, kind="csv", path=str(urls), name="u"))
    )
    assert got == [(0, b"http://example.com/a.jpg", {"caption": b"one"}, None)]


@pytest.mark.parametrize("suffix", [".gz", ".zst", ".zstd"])
@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_compressed_row_file_reads_as_its_plain_one_and_one_cut_short_is_truncated_input(
    tmp_path: Path, kind: str, suffix: str
) -> None:
    """Row files and url lists are opened by the text jobs' opener (document_rows.decompressed): a .gz,
    .zst or .zstd file gives its plain file's rows, and one cut inside its last member or frame keeps rows
    read before the cut and is counted once as truncated_input, never read short in silence."""
    from apache_beam.pvalue import TaggedOutput

    from dew.preprocess.image_reading import ImageReadOptions
    from dew.preprocess.image_sources import Source
    from dew.preprocess.url_reading import _ReadUrlSource, find_url_sources

    urls = [f"http://example.com/{i}.jpg" for i in range(40)]
    if kind == "csv":
        lines = [b"url,caption\n", *(f"{url},image {i}\n".encode() for i, url in enumerate(urls))]
    else:
        lines = [json.dumps({"url": url, "caption": f"image {i}"}).encode() + b"\n" for i, url in enumerate(urls)]
    reason = "missing_field" if kind == "csv" else "malformed_json"
    lines.insert(6, b",no url\n" if kind == "csv" else b"{broken\n")  # a dropped row, counted alike in every file

    def read(name: str, data: bytes) -> tuple[list, dict]:
        path = tmp_path / name
        path.write_bytes(data)
        (source,) = find_url_sources([str(path)])[0]
        assert source.kind == kind
        reader = _ReadUrlSource(ImageReadOptions(image_field="url"))
        reader.setup()
        out = list(reader.process((Source(index=0, kind=kind, path=str(path), name="urls"),)))
        assert isinstance(out[-1], TaggedOutput)
        return out[:-1], out[-1].value

    plain, tally = read(f"plain.{kind}", b"".join(lines))
    assert [value[0] for _, value in plain] == [url.encode() for url in urls]
    assert tally == {"images_in": len(urls) + 1, reason: 1, "damaged_inputs": []}

    data, last = compressed([b"".join(lines[:30]), b"".join(lines[30:])], suffix)
    assert read(f"whole.{kind}{suffix.upper()}", data) == (plain, tally)  # the suffix in any case

    path = tmp_path / f"cut.{kind}{suffix}"
    cut, tally = read(path.name, data[: (last + len(data)) // 2])
    # The rows before the cut stand, as many as were decoded before it (gzip fills its buffer across members).
    assert cut == plain[: len(cut)] and len(cut) < len(plain)
    if kind == "jsonl" and suffix != ".gz":  # whole zstd frames reach the line reader before the cut one
        assert len(cut) >= 29
    assert tally["truncated_input"] == 1 and tally["images_in"] == len(cut) + tally.get(reason, 0) + 1
    (damaged,) = tally["damaged_inputs"]
    assert damaged["path"] == str(path) and damaged["reason"] == "truncated_input"


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
    sent = len(good_images()) + 1 + len(bad_images())  # the good ones, one of them again, the bad ones
    assert stats["images_in"] == stats["images_written"] + sum(stats["dropped"].values()) == found["images_in"] == sent
    assert found["images_encoded"] == 8 and found["too_small"] == 1
    assert (out / "train.pieces.npz").exists() and not (out / ".dew-tmp").exists()
    text = inspect_text(str(out), "--samples", "1")
    assert f"images: 7 written of {sent} read" in text and "dropped duplicate: 1" in text
    assert "sample 0: image: " in text and ", caption: " in text


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
    text = inspect_text(str(out), "--samples", "1")
    assert "images: 9 written of 9 read" in text and f"caption_tokenizer {caption_tokenizer}" in text
    assert "input_ids: 308 bytes, attention_mask: 308 bytes" in text
    # Refused on the launcher as a usage error (one line, exit 2), not a traceback from pipeline building.
    with pytest.raises(UsageError, match=rf"{out} already holds captions tokenized by"):
        caption_tokenize_job.main(["--input", str(out), "--output", str(tmp_path / "twice"), *flags])
    with pytest.raises(UsageError, match=r"never committed.*`dew-preprocess images \.\.\. --output"):
        caption_tokenize_job.main(["--input", str(image_folder), "--output", str(tmp_path / "raw"), *flags])


@pytest.mark.beam
def test_one_or_two_workers_and_a_crash_rerun_write_the_same_bytes(image_folder: Path, tmp_path: Path) -> None:
    flags = ("--input", str(image_folder), "--size", "48", "--num_shards", "3", "--val_fraction", "0.3", "--dedupe")
    run_images(tmp_path / "one", *flags)
    run_images(tmp_path / "two", *flags, runner=TWO_WORKERS)
    assert listing(tmp_path / "one") == listing(tmp_path / "two")
    # A fresh launcher forks its two workers (dew.pipelines.forked_workers): the same bytes again.
    done = run_preprocess("images", "--output", str(tmp_path / "forked"), *flags, "--direct_num_workers", "2")
    assert done.returncode == 0, done.stderr[-3000:]
    assert listing(tmp_path / "forked") == listing(tmp_path / "one")

    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00003.array_record"
    blocker.mkdir(parents=True)  # a directory where a shard must go: writing that shard fails for real
    with pytest.raises(Exception, match="train-00001-of-00003"):
        run_images(crashed, *flags)
    assert not (crashed / formats.META).exists()
    committed = {p.name for p in crashed.iterdir() if p.is_file() and formats.parse_shard_name(p.name)}
    blocker.rmdir()
    found = run_images(crashed, *flags)
    assert found.get("shards_skipped", 0) == len(committed) and found["shards_written"] == 4 - len(committed)
    assert listing(crashed) == listing(tmp_path / "one")
    assert run_images(crashed, *flags) == {}  # committed by this very job: nothing to do


@pytest.mark.beam
def test_parquet_and_jsonl_rows_with_bytes_paths_and_damage(tmp_path: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    good, bad = good_images(), bad_images()
    photos = tmp_path / "rows" / "photos"
    photos.mkdir(parents=True)
    for name in ("coins.png", "chelsea.jpg"):
        (photos / name).write_bytes(good[name])
    (photos / "corrupt.jpg").write_bytes(bad["corrupt.jpg"][0])
    rows = tmp_path / "rows"
    images = [good["astronaut.jpg"], None, good["coffee.png"]]
    pq.write_table(
        pa.table({"image": images, "caption": ["an astronaut", "no image", None], "source": ["a"] * 3}),
        rows / "a.parquet",
    )
    structs = [
        {"bytes": good["rocket.webp"], "path": None},
        {"bytes": None, "path": "photos/coins.png"},
        {"bytes": None, "path": "photos/missing.png"},
    ]
    pq.write_table(
        pa.table({"image": structs, "caption": ["a rocket", "coins", "gone"], "source": ["b"] * 3}), rows / "b.parquet"
    )
    lines = [
        json.dumps({"image": "photos/chelsea.jpg", "caption": "a cat", "source": "c"}),
        "{not json",
        json.dumps({"image": "photos/corrupt.jpg", "caption": "broken", "source": "c"}),
    ]
    (rows / "c.jsonl").write_text("\n".join(lines) + "\n")
    whole = (rows / "a.parquet").read_bytes()
    (rows / "d.parquet").write_bytes(whole[: len(whole) // 2])
    # c.jsonl again as zstd (two frames): whole, and cut inside its last frame.
    zst, last = compressed([f"{lines[0]}\n{lines[1]}\n".encode(), f"{lines[2]}\n".encode()], ".zst")
    (rows / "e.jsonl.zst").write_bytes(zst)
    (rows / "f.jsonl.zst").write_bytes(zst[: (last + len(zst)) // 2])
    out = tmp_path / "out"
    flags = ("--extra_field", "source", "--format", "parquet", "--resize", "shorter_side", "--size", "48")
    inputs = [f"--input={rows / pattern}" for pattern in ("*.parquet", "*.jsonl", "*.jsonl.zst")]
    run_images(out, *inputs, *flags, "--encoding", "webp")

    records = read_records(out)
    assert [(r["caption"], r["source"]) for r in records] == [
        (b"an astronaut", b"a"),
        (b"a rocket", b"b"),
        (b"coins", b"b"),
        (b"a cat", b"c"),
        (b"a cat", b"c"),  # e.jsonl.zst: c.jsonl's one good row, the same record
        (b"a cat", b"c"),  # f.jsonl.zst: its first frame, read before the cut
    ]
    assert records[3] == records[4] == records[5]
    assert all(min(pixels.decode(r["image"]).shape[:2]) == 48 for r in records)
    stats = json.loads((out / "stats.json").read_text())
    assert {k: v for k, v in stats["dropped"].items() if v} == {
        "missing_field": 2,
        "missing_image": 1,
        "malformed_json": 3,
        "undecodable": 2,
        "truncated_input": 2,  # d.parquet, and f.jsonl.zst's last frame: the reason tokenize counts it under
    }
    assert stats["images_in"] == 16
    damaged = [(d["path"], d["reason"]) for d in stats["damaged_inputs"]]
    assert damaged == [(str(rows / "d.parquet"), "truncated_input"), (str(rows / "f.jsonl.zst"), "truncated_input")]
    text = inspect_text(str(out), "--samples", "2")
    assert "images: 6 written of 16 read" in text and "dropped truncated_input: 2" in text
    assert "sample 1: image: " in text and "source: 1 bytes" in text


@pytest.mark.beam
def test_a_saved_hf_dataset_is_read_from_arrow_without_decoding(
    tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    import datasets

    photos = tmp_path / "photos"
    photos.mkdir()
    captions = {}
    for name, data in good_images().items():
        (photos / name).write_bytes(data)
        captions[str(photos / name)] = f"a photograph named {name}"
    table = datasets.Dataset.from_dict({"image": list(captions), "text": list(captions.values())})
    saved = tmp_path / "saved"
    table.cast_column("image", datasets.Image()).save_to_disk(str(saved))

    def never(*args: object, **kwargs: object) -> None:
        raise AssertionError("the job decoded an image through datasets")

    monkeypatch.setattr(datasets.Image, "decode_example", never)
    out = tmp_path / "out"
    run_images(out, "--input", str(saved), "--caption_field", "text", "--resize", "keep", "--encoding", "png")
    records = read_records(out)
    assert [r["caption"].decode() for r in records] == list(captions.values())
    for record, name in zip(records, good_images(), strict=True):
        want = pixels.decode(good_images()[name])
        assert pixels.decode(record["image"]).shape == want.shape
    assert formats.read_meta(str(out)).section.resize == "keep"


def test_inputs_that_cannot_make_one_directory_are_refused(image_folder: Path, tmp_path: Path) -> None:
    from dew.preprocess.image_sources import find_sources

    (tmp_path / "loose.png").write_bytes(good_images()["coins.png"])
    with pytest.raises(ValueError, match="mix ImageFolder"):
        find_sources([str(image_folder), str(tmp_path / "loose.png")])
    (tmp_path / "dict").mkdir()
    (tmp_path / "dict" / "dataset_dict.json").write_text(json.dumps({"splits": ["train", "test"]}))
    with pytest.raises(ValueError, match=r"DatasetDict.*\['test', 'train'\]"):
        find_sources([str(tmp_path / "dict")])
    (image_folder / "cat" / "more").mkdir()
    (image_folder / "cat" / "more" / "deeper.png").write_bytes(good_images()["coins.png"])
    (image_folder / "beside.png").write_bytes(good_images()["coins.png"])
    with pytest.raises(ValueError, match=r"2 images lie elsewhere in it \(beside.png, cat/more/deeper.png\)"):
        find_sources([str(image_folder)])
    with pytest.raises(UsageError, match=r"no \{label\}"):
        images_job.main(["--input", str(tmp_path / "loose.png"), "--output", str(tmp_path / "o")])


def test_a_job_whose_filters_drop_every_image_fails_and_commits_nothing(tmp_path: Path) -> None:
    (tmp_path / "folder" / "cat").mkdir(parents=True)
    (tmp_path / "folder" / "cat" / "coffee.png").write_bytes(good_images()["coffee.png"])
    out = tmp_path / "out"
    from dew.preprocess.drops import TooManyDropsError

    with pytest.raises(TooManyDropsError, match=r"wrote none of 1 images(.|\n)*too_small: 1 .*--min_size"):
        run_images(out, "--input", str(tmp_path / "folder"), "--min_size", "100000")
    assert not (out / formats.META).exists()
    assert not list(out.glob("*.array_record"))
    run_images(out, "--input", str(tmp_path / "folder"))  # the corrected flags need no --overwrite
    assert len(read_records(out)) == 1


@pytest.mark.parametrize(
    ("flag", "value", "refusal"),
    [
        ("--quality", "0", r"--quality must be in 1\.\.100, got 0"),
        ("--caption_template", "a photo of a {lable}", r"can name only \{label\} and \{stem\} \(KeyError\('lable'\)\)"),
    ],
)
def test_flags_a_worker_would_fail_on_are_refused_on_the_launcher(
    image_folder: Path, tmp_path: Path, flag: str, value: str, refusal: str
) -> None:
    with pytest.raises(UsageError, match=refusal):
        run_images(tmp_path / "out", "--input", str(image_folder), flag, value)
    assert not (tmp_path / "out").exists()


def test_a_shard_size_of_zero_is_refused_not_taken_as_one_byte(
    image_folder: Path, tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    with pytest.raises(SystemExit):
        run_images(tmp_path / "out", "--input", str(image_folder), "--shard_size_mb", "0")
    assert "--shard_size_mb: must be a positive number, got '0'" in capsys.readouterr().err


@pytest.mark.beam
def test_files_of_a_folder_that_are_not_read_are_counted_by_reason(image_folder: Path, tmp_path: Path, capsys) -> None:
    """An image of an unsupported format is a drop (in = written + dropped); hidden and text files are counted."""
    shutil.rmtree(image_folder / "misc")
    (image_folder / "cat" / "phone.heic").write_bytes(b"\0\0\0\x18ftypheic")
    (image_folder / "cat" / "next.avif").write_bytes(b"\0\0\0\x1cftypavif")
    (image_folder / "space" / "IMG_0001").write_bytes(good_images()["coins.png"])  # no suffix: not ruled out
    (image_folder / "cat" / ".DS_Store").write_bytes(b"Bud1")
    (image_folder / ".ipynb_checkpoints").mkdir()  # a hidden folder is no class
    (image_folder / ".ipynb_checkpoints" / "a-checkpoint.png").write_bytes(good_images()["coins.png"])
    (image_folder / "cat" / "notes.txt").write_text("taken in 2019")
    (image_folder / "README.md").write_text("photos")
    out = tmp_path / "out"
    found = run_images(out, "--input", str(image_folder), "--size", "64", "--max_pixels", str(MAX_PIXELS))
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dropped"]["unsupported_format"] == found["unsupported_format"] == 3
    assert stats["images_in"] == stats["images_written"] + sum(stats["dropped"].values()) == 11
    assert stats["ignored_files"] == {"hidden": 2, "not_image": 2}
    assert {r["label"] for r in read_records(out)} == {b"cat", b"space"}
    said = capsys.readouterr().err
    assert "3 files in" in said and "cat/next.avif" in said and "convert" in said


def test_image_files_are_read_in_units_and_a_damaged_file_in_one_is_counted_alone(tmp_path: Path) -> None:
    """A unit's records keep each file's own key and draw; its one tally sums its files' and names each
    damaged file on its own; a row file is a unit alone, between runs of image files."""
    from dew.preprocess.image_reading import ImageReadOptions, ReadSource
    from dew.preprocess.image_sources import FILES_PER_READ, UNSUPPORTED, Source, reads
    from dew.preprocess.read_documents import DAMAGED

    (tmp_path / "a.jpg").write_bytes(good_images()["astronaut.jpg"])
    (tmp_path / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    (tmp_path / "b.heic").write_bytes(b"\0\0\0\x18ftypheic")
    unit = (
        Source(index=3, kind="image", path=str(tmp_path / "a.jpg"), name="c/a.jpg", label="c"),
        Source(index=4, kind="image", path=str(tmp_path / "gone.jpg"), name="c/gone.jpg", label="c"),
        Source(index=5, kind=UNSUPPORTED, path=str(tmp_path / "b.heic"), name="c/b.heic", label="c"),
        Source(index=6, kind="image", path=str(tmp_path / "a.jpg"), name="d/a.jpg", label="d"),
    )
    reader = ReadSource(ImageReadOptions())
    reader.setup()
    out = list(reader.process(unit))
    records, (tally,) = out[:-1], [o.value for o in out[-1:]]
    assert [(key, draw) for key, (_, _, draw) in records] == [((3, 0), unit[0].draw(0)), ((6, 0), unit[3].draw(0))]
    assert [fields["label"] for _, (_, fields, _) in records] == [b"c", b"d"]
    assert {k: v for k, v in tally.items() if k != DAMAGED} == {
        "images_in": 4,
        "dangling_symlink": 1,
        "unsupported_format": 1,
    }
    assert [d["path"] for d in tally[DAMAGED]] == [str(tmp_path / "gone.jpg")]

    images = [Source(index=i, kind="image", path=f"{i}.jpg", name=f"{i}.jpg") for i in range(FILES_PER_READ + 3)]
    rows = Source(index=len(images), kind="jsonl", path="r.jsonl", name="r.jsonl")
    units = reads([*images[:2], rows, *images[2:]])
    assert [len(u) for u in units] == [2, 1, FILES_PER_READ, 1] and units[1] == (rows,)
    assert [s for u in units for s in u] == [*images[:2], rows, *images[2:]]


@pytest.mark.beam
def test_a_folder_read_in_units_writes_the_bytes_and_stats_of_one_file_a_unit(
    image_folder: Path, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """Units of many files (here several, one of them holding a broken link, an unsupported file and bad
    images) give the same directory, stats.json included, as one file a unit did."""
    from dew.preprocess import image_sources

    for i, (name, data) in enumerate(good_images().items()):
        (image_folder / "cat" / f"copy{i}-{name}").write_bytes(data)
    (image_folder / "cat" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    (image_folder / "misc" / "phone.heic").write_bytes(b"\0\0\0\x18ftypheic")
    flags = ("--input", str(image_folder), "--size", "32", "--max_pixels", str(MAX_PIXELS), "--val_fraction", "0.3")
    assert len(image_sources.reads(image_sources.find_sources([str(image_folder)]).sources)) > 1
    run_images(tmp_path / "units", *flags)
    monkeypatch.setattr(image_sources, "FILES_PER_READ", 1)
    run_images(tmp_path / "files", *flags)
    assert listing(tmp_path / "units") == listing(tmp_path / "files")
    stats = json.loads((tmp_path / "units" / "stats.json").read_text())
    assert [d["path"] for d in stats["damaged_inputs"]] == [str(image_folder / "cat" / "gone.jpg")]
    assert stats["dropped"]["dangling_symlink"] == stats["dropped"]["unsupported_format"] == 1

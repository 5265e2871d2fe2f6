"""caption-tokenize checks its input against meta.json as the runtime does: a swapped, flipped, truncated
or miscounted shard fails the job in one line naming the shard, and nothing is committed."""

from __future__ import annotations

import shutil
from pathlib import Path

import pytest

from dew.data import formats
from dew.pipelines import cli
from tests.preprocess.test_images_job import IN_MEMORY, caption_tokenizer, read_records  # noqa: F401 (a fixture)
from tests.runtime import image_support as support
from tests.runtime.test_committed import rewrite_records

pytestmark = pytest.mark.beam
OVERWRITE = "rerun the preprocess job with --overwrite"


def committed_images(directory: Path) -> Path:
    # Two shards of the same records in other orders: the same size, other bytes.
    first = support.records(4)
    support.write_committed(str(directory), {"train": [first, first[::-1]]})
    return directory


def run(images: Path, out: Path, tokenizer: str, capsys: pytest.CaptureFixture[str]) -> tuple[int, str]:
    argv = ["caption-tokenize", "--input", str(images), "--output", str(out), "--tokenizer", tokenizer, *IN_MEMORY]
    code = cli.main(argv)
    return code, capsys.readouterr().err


def damage(images: Path, how: str) -> str:
    """Damages the committed directory; returns the name of the shard the error must name."""
    a, b = images / "train-00000-of-00002.array_record", images / "train-00001-of-00002.array_record"
    if how == "swapped":
        assert a.stat().st_size == b.stat().st_size and a.read_bytes() != b.read_bytes()
        held = a.read_bytes()
        shutil.copyfile(b, a)
        b.write_bytes(held)
        return a.name
    if how == "flipped":
        data = bytearray(b.read_bytes())
        data[len(data) // 2] ^= 0x01
        b.write_bytes(bytes(data))
        return b.name
    if how == "truncated":
        b.write_bytes(b.read_bytes()[:-9])
        return b.name
    return rewrite_records(images, "train", 1, {"fewer": -1, "more": 1}[how])


@pytest.mark.parametrize("how", ["swapped", "flipped", "truncated", "fewer", "more"])
def test_a_shard_unlike_its_meta_json_fails_the_job_by_name_and_commits_nothing(
    how: str,
    tmp_path: Path,
    caption_tokenizer: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    images = committed_images(tmp_path / "images")
    name = damage(images, how)
    out = tmp_path / "out"
    code, err = run(images, out, caption_tokenizer, capsys)
    assert code == 2 and "Traceback" not in err, err
    assert str(images / name) in err and OVERWRITE in err, err
    said = {
        "swapped": "fails its",
        "flipped": "fails its",
        "truncated": "truncated",
        "fewer": "holds 4 records by its own footer, but meta.json records 3",
        "more": "holds 4 records by its own footer, but meta.json records 5",
    }[how]
    assert said in err, err
    assert not (out / formats.META).exists()


def test_an_undamaged_input_is_tokenized_record_for_record(
    tmp_path: Path,
    caption_tokenizer: str,  # noqa: F811
    capsys: pytest.CaptureFixture[str],
) -> None:
    images = committed_images(tmp_path / "images")
    code, err = run(images, tmp_path / "out", caption_tokenizer, capsys)
    assert code == 0, err
    before, after = read_records(images), read_records(tmp_path / "out")
    assert [{k: r[k] for k in ("image", "caption")} for r in after] == before

"""An image that decodes and passes every rule but is longer than its encoding can hold (WebP 16,383 px a
side, JPEG 65,500, PNG 1,000,000) is one dropped image, `unencodable`, in the images and ingest-urls jobs
alike: it never fails the job, the books balance, and the good images beside it are written byte for byte
as a run without it writes them."""

from __future__ import annotations

import json
from collections.abc import Iterator
from pathlib import Path

import numpy as np
import pytest

from dew.data.images import pixels
from dew.pipelines import images_job, ingest_urls_job
from tests.preprocess.photos import encoded, good_images
from tests.preprocess.test_images_job import IN_MEMORY, read_records

pytest.importorskip("cv2")
pytest.importorskip("skimage.data")

from tests.runtime.online_support import ImageServer

pytestmark = pytest.mark.beam
# The shorter side scaled to 128 keeps a 130 × 17000 image 16,738 px long: past WebP's 16,383.
FLAGS = ("--encoding", "webp", "--resize", "shorter_side", "--size", "128", "--max_aspect", "200")


def long_image() -> bytes:
    """A 130 × 17000 PNG of gradients (no flat colour), a few hundred KB."""
    x = np.arange(17000)[None, :]
    y = np.arange(130)[:, None]
    rgb = np.stack(np.broadcast_arrays(x % 256, y * 2 + 0 * x, (x // 67) % 256), axis=-1)
    return encoded(rgb.astype(np.uint8), "PNG")


@pytest.mark.parametrize(
    ("encoding", "most"),
    [("webp", 16_383), ("jpeg", 65_500), ("png", 1_000_000)],
)
def test_each_encoding_takes_its_longest_side_and_drops_one_longer_as_unencodable(encoding: str, most: int) -> None:
    for shape in ((8, most, 3), (most, 8, 3)):
        gradient = np.broadcast_to(np.arange(shape[0] * shape[1], dtype=np.uint8).reshape(shape[:2])[..., None], shape)
        assert pixels.encode(gradient, encoding)  # the longest side it holds
        longer = np.zeros((shape[0] + (shape[0] > 8), shape[1] + (shape[1] > 8), 3), np.uint8)
        with pytest.raises(pixels.ImageRejected) as rejected:
            pixels.encode(longer, encoding)
        assert rejected.value.reason == pixels.UNENCODABLE
        assert f"{longer.shape[1]} × {longer.shape[0]}" in str(rejected.value) and encoding in str(rejected.value)


def _images(output: Path, folder: Path) -> dict:
    return images_job.main(["--input", str(folder), "--output", str(output), *FLAGS, *IN_MEMORY])


def test_the_images_job_drops_an_image_too_long_for_webp_and_writes_the_rest_as_without_it(tmp_path: Path) -> None:
    good, bad = tmp_path / "good", tmp_path / "bad"
    for folder in (good, bad):
        (folder / "photos").mkdir(parents=True)
        for name, data in good_images().items():
            (folder / "photos" / name).write_bytes(data)
    (bad / "photos" / "panorama.png").write_bytes(long_image())

    counters = _images(tmp_path / "out-bad", bad)
    _images(tmp_path / "out-good", good)

    stats = json.loads((tmp_path / "out-bad" / "stats.json").read_text())
    assert {k: v for k, v in stats["dropped"].items() if v} == {"unencodable": 1}
    assert stats["images_in"] == len(good_images()) + 1 == stats["images_written"] + 1
    assert counters["unencodable"] == 1
    assert read_records(tmp_path / "out-bad") == read_records(tmp_path / "out-good")


@pytest.fixture(scope="module")
def server() -> Iterator[ImageServer]:
    served = ImageServer()
    served.bodies["long"] = long_image()
    served.start()
    try:
        yield served
    finally:
        served.stop()


def _ingest(output: Path, urls: list[str]) -> dict:
    import pyarrow as pa
    import pyarrow.parquet as pq

    (output.parent / f"{output.name}-in").mkdir()
    table = output.parent / f"{output.name}-in" / "urls.parquet"
    pq.write_table(pa.table({"url": urls, "caption": [f"image {i}" for i in range(len(urls))]}), table)
    argv = ["--input", str(table), "--output", str(output), "--timeout", "10", "--retries", "1", "--threads", "4"]
    return ingest_urls_job.main([*argv, *FLAGS, *IN_MEMORY])


def test_ingest_urls_drops_an_image_too_long_for_webp_in_its_books_and_status_table(
    server: ImageServer, tmp_path: Path
) -> None:
    import pyarrow.parquet as pq

    photos = [server.url("photo", i) for i in range(4)]
    long_url = server.url("long", 0)
    counters = _ingest(tmp_path / "bad", [*photos[:2], long_url, *photos[2:]])
    _ingest(tmp_path / "good", [*photos[:2], server.url("missing", 0), *photos[2:]])

    stats = json.loads((tmp_path / "bad" / "stats.json").read_text())
    assert {k: v for k, v in stats["dropped"].items() if v} == {"unencodable": 1}
    assert stats["urls_in"] == 5 == stats["images_written"] + 1
    assert counters["unencodable"] == 1
    tables = sorted((tmp_path / "bad").glob("*.status.parquet"))
    rows = [row for table in tables for row in pq.read_table(table).to_pylist()]
    assert [(r["status"], r["reason"]) for r in rows if r["url"] == long_url] == [("dropped", "unencodable")]
    assert stats["refetchable"] == 0  # the answer itself: refetching gives the same image
    # The same rows, the long url's in the other run a 404: every good record the same bytes but its url.
    assert read_records(tmp_path / "bad") == read_records(tmp_path / "good")

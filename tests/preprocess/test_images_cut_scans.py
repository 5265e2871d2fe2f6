"""The images job drops a JPEG whose scan ends early as truncated, one whose scan data libjpeg decodes
wrong as corrupt_scan, and keeps one with stray bytes."""

from __future__ import annotations

import json
from pathlib import Path

import pytest

from dew.data.images import pixels
from dew.preprocess.write_images import ImagesPlan
from tests.preprocess.photos import corrupt_scan_jpegs, cut_scan_jpegs, good_images, stray_byte_jpegs
from tests.preprocess.test_images_job import read_records, run_images

pytest.importorskip("simplejpeg")


def test_cut_scans_are_dropped_as_truncated_and_stray_bytes_kept_with_the_books_balanced(tmp_path: Path) -> None:
    folder = tmp_path / "folder" / "things"
    folder.mkdir(parents=True)
    cut, corrupt, stray = cut_scan_jpegs(), corrupt_scan_jpegs(), stray_byte_jpegs()
    whole = {"astronaut.jpg": good_images()["astronaut.jpg"]}
    for name, data in {**cut, **corrupt, **stray, **whole}.items():
        (folder / name).write_bytes(data)
    out = tmp_path / "out"
    found = run_images(out, "--input", str(tmp_path / "folder"), "--size", "64", "--encoding", "png")

    stats = json.loads((out / "stats.json").read_text())
    assert {k: v for k, v in stats["dropped"].items() if v} == {"truncated": len(cut), "corrupt_scan": len(corrupt)}
    assert stats["images_written"] == len(stray) + len(whole) == found["images_encoded"]
    dropped = sum(stats["dropped"].values())
    assert stats["images_in"] == stats["images_written"] + dropped == len(cut) + len(corrupt) + len(stray) + 1
    plan = ImagesPlan(output="unused", size=64, encoding="png")
    written = sorted(r["image"] for r in read_records(out))
    assert written == sorted(plan.image_bytes(data) for data in {**stray, **whole}.values())
    for data in stray.values():  # the stray-byte files: what Pillow alone decodes, squared
        assert plan.image_bytes(data) == pixels.encode(pixels.square(_pillow(data, 64), 64), "png")


def _pillow(data: bytes, size: int):
    import io

    import numpy as np
    from PIL import Image

    image = Image.open(io.BytesIO(data))
    image.draft("RGB", (size, size))
    return np.asarray(image.convert("RGB"))

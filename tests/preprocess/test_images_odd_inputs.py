"""The images job against inputs that change under it or spell one text two ways: a file gone between the
launcher's listing and the worker's read is one dropped image, never a failed job, never called a pipe;
a class folder's name is one label however its Unicode is composed."""

from __future__ import annotations

import json
import os
import unicodedata
from pathlib import Path

import pytest

from dew.pipelines import images_job
from dew.preprocess import files
from tests.preprocess.photos import good_images
from tests.preprocess.test_images_job import IN_MEMORY, read_records

pytest.importorskip("cv2")
pytest.importorskip("skimage.data")

pytestmark = pytest.mark.beam


def _tree(root: Path, classes: dict[str, list[str]]) -> None:
    photos = good_images()
    for label, names in classes.items():
        (root / label).mkdir(parents=True, exist_ok=True)
        for name in names:
            (root / label / name).write_bytes(photos[name])


def _run(output: Path, *flags: str) -> dict:
    return images_job.main(["--output", str(output), "--size", "64", *flags, *IN_MEMORY])


def _dropped(output: Path) -> dict[str, int]:
    stats = json.loads((output / "stats.json").read_text())
    assert stats["images_in"] == stats["images_written"] + sum(stats["dropped"].values())
    return {reason: n for reason, n in stats["dropped"].items() if n}


def test_an_image_file_gone_after_the_listing_is_a_missing_image(tmp_path: Path, monkeypatch) -> None:
    """Deleted after the launcher listed the tree: it was counted as not_a_file, 'a directory, a pipe or a device'."""
    _tree(tmp_path / "in", {"cat": ["astronaut.jpg", "coffee.png", "rocket.webp"]})
    listed = images_job.find_sources

    def list_then_delete(patterns):
        found = listed(patterns)
        os.remove(tmp_path / "in" / "cat" / "coffee.png")
        return found

    monkeypatch.setattr(images_job, "find_sources", list_then_delete)
    _run(tmp_path / "out", "--input", str(tmp_path / "in"))
    assert _dropped(tmp_path / "out") == {"missing_image": 1}


@pytest.mark.parametrize("sidecar", [False, True])
def test_a_file_gone_between_its_checks_and_its_read_is_dropped_not_the_job(
    tmp_path: Path, monkeypatch, sidecar: bool
) -> None:
    """Deleted in the moment between the worker's checks and its open: FileNotFoundError ended the job."""
    _tree(tmp_path / "in", {"cat": ["astronaut.jpg", "coffee.png", "rocket.webp"]})
    for name in ("astronaut", "coffee", "rocket"):
        (tmp_path / "in" / "cat" / f"{name}.txt").write_text(f"a photo of {name}")
    doomed = tmp_path / "in" / "cat" / ("coffee.txt" if sidecar else "coffee.png")
    # The sidecar is checked with files.exists, the image with files.is_regular_file, each just before its read.
    name = "exists" if sidecar else "is_regular_file"
    checked = getattr(files, name)

    def check_then_delete(path: str) -> bool:
        found = checked(path)
        if path == str(doomed) and found:
            doomed.unlink()
        return found

    monkeypatch.setattr(files, name, check_then_delete)
    _run(tmp_path / "out", "--input", str(tmp_path / "in"), *(["--caption_sidecar"] if sidecar else []))
    assert _dropped(tmp_path / "out") == {"missing_field" if sidecar else "missing_image": 1}


def test_a_class_folder_named_in_nfd_gives_the_nfc_label_a_folder_named_in_nfc_gives(tmp_path: Path) -> None:
    """`café` spelt with a combining accent (as macOS's HFS+ stores names) and precomposed are one text: they
    were two labels, b'cafe\\xcc\\x81' and b'caf\\xc3\\xa9', two classes to a model that read them the same."""
    nfd, nfc = unicodedata.normalize("NFD", "café"), unicodedata.normalize("NFC", "café")
    assert nfd != nfc
    _tree(tmp_path / "in", {nfd: ["astronaut.jpg", "coffee.png"], nfc: ["rocket.webp"], "cat": ["coins.png"]})
    _run(tmp_path / "out", "--input", str(tmp_path / "in"), "--caption_template", "a {label}: {stem}")
    records = read_records(tmp_path / "out")
    assert sorted(r["label"] for r in records) == sorted([nfc.encode()] * 3 + [b"cat"])
    assert all(r["caption"].decode() == unicodedata.normalize("NFC", r["caption"].decode()) for r in records)


def test_a_row_file_gone_after_the_listing_says_so(tmp_path: Path, monkeypatch) -> None:
    """A jsonl of rows deleted after the launcher listed it was counted as unreadable "(its permissions)",
    sending the user to check permissions on a file that is not there."""
    _tree(tmp_path / "in", {"cat": ["astronaut.jpg"]})
    rows, kept = tmp_path / "rows.jsonl", tmp_path / "kept.jsonl"
    rows.write_text(json.dumps({"image": "in/cat/astronaut.jpg", "caption": "a photo"}) + "\n")
    kept.write_text(rows.read_text())
    listed = images_job.find_sources

    def list_then_delete(patterns):
        found = listed(patterns)
        os.remove(rows)
        return found

    monkeypatch.setattr(images_job, "find_sources", list_then_delete)
    _run(tmp_path / "out", "--input", str(kept), "--input", str(rows))
    stats = json.loads((tmp_path / "out" / "stats.json").read_text())
    (named,) = [entry for entry in stats["damaged_inputs"] if entry["path"].endswith("rows.jsonl")]
    assert named["reason"] == "unreadable" and "gone" in named["error"], named

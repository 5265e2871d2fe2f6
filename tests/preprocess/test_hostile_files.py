"""A folder of odd files and rows of odd paths: the images job counts each under its reason, never crashes,
writes every good record as its source held it, and its books balance (in = written + dropped)."""

from __future__ import annotations

import json
import os
import shutil
import subprocess
import sys
from pathlib import Path

import pytest

from dew.preprocess.write_images import ImagesPlan
from tests.preprocess.photos import good_images
from tests.preprocess.test_images_job import IN_MEMORY, read_records, run_images

pytestmark = pytest.mark.beam
SIZE = 32


def stored(data: bytes) -> bytes:
    """The image bytes the job stores for a source image at --size SIZE (the default center_crop, jpeg)."""
    return ImagesPlan(output="unused", size=SIZE).image_bytes(data)


def written(out: Path) -> dict[bytes, bytes]:
    records = read_records(out)
    captions = [record["caption"] for record in records]
    assert len(set(captions)) == len(captions)
    return {record["caption"]: record["image"] for record in records}


def balanced(stats: dict) -> None:
    assert stats["images_in"] == stats["images_written"] + sum(stats["dropped"].values())


def test_rows_naming_a_directory_a_url_or_a_pipe_are_counted_and_file_urls_are_read(tmp_path: Path) -> None:
    photos = good_images()
    (tmp_path / "a b.jpg").write_bytes(photos["astronaut.jpg"])
    (tmp_path / "coffee.png").write_bytes(photos["coffee.png"])
    (tmp_path / "folder.jpg").mkdir()
    os.mkfifo(tmp_path / "pipe.jpg")  # reading it would wait for a writer forever
    rows = [
        ("relative", "coffee.png"),
        ("file url", (tmp_path / "a%20b.jpg").as_uri().replace("%2520", "%20")),
        ("file url of localhost", f"file://localhost{tmp_path}/coffee.png"),
        ("directory", "folder.jpg"),
        ("pipe", str(tmp_path / "pipe.jpg")),
        ("http", "http://127.0.0.1:9/a.jpg"),
        ("https", "https://example.com/a.jpg"),
        ("file url of another host", f"file://fileserver{tmp_path}/coffee.png"),
        ("missing", "nowhere.jpg"),
    ]
    (tmp_path / "rows.jsonl").write_text("".join(json.dumps({"image": i, "caption": c}) + "\n" for c, i in rows))
    out = tmp_path / "out"
    found = run_images(out, "--input", str(tmp_path / "rows.jsonl"), "--size", str(SIZE), "--caption_template", "x")
    stats = json.loads((out / "stats.json").read_text())
    balanced(stats)
    assert stats["images_in"] == len(rows)
    assert {k: v for k, v in stats["dropped"].items() if v} == {"not_a_file": 2, "remote_path": 3, "missing_image": 1}
    assert found["not_a_file"] == 2 and found["remote_path"] == 3
    assert written(out) == {
        b"relative": stored(photos["coffee.png"]),
        b"file url": stored(photos["astronaut.jpg"]),
        b"file url of localhost": stored(photos["coffee.png"]),
    }


def _non_utf8(directory: Path, name: bytes) -> str:
    return os.fsdecode(os.path.join(os.fsencode(directory), name))


def test_a_folder_of_odd_files_counts_each_by_the_reason_the_launcher_names(tmp_path: Path, capsys) -> None:
    photos = good_images()
    tree = tmp_path / "tree"
    for label, name in (("cat", "astronaut.jpg"), ("cat", "coffee.png"), ("dog", "coins.png")):
        (tree / label).mkdir(parents=True, exist_ok=True)
        (tree / label / name).write_bytes(photos[name])
    Path(_non_utf8(tree / "cat", b"caf\xe9.jpg")).write_bytes(photos["chelsea.jpg"])  # a Latin-1 name
    os.mkdir(_non_utf8(tree, b"\xe9t\xe9"))  # a class folder whose name is Latin-1
    Path(_non_utf8(tree, b"\xe9t\xe9"), "sun.jpg").write_bytes(photos["astronaut.jpg"])
    (tmp_path / "elsewhere").mkdir()
    (tmp_path / "elsewhere" / "rocket.webp").write_bytes(photos["rocket.webp"])
    (tree / "bird").symlink_to(tmp_path / "elsewhere")  # a symlinked class folder: not followed, listed
    (tree / "fish").symlink_to(tmp_path / "gone")  # a symlinked class folder leading nowhere
    (tree / "cat" / "gone.jpg").symlink_to(tmp_path / "nowhere.jpg")
    os.mkfifo(tree / "dog" / "pipe.jpg")
    out = tmp_path / "out"
    flags = ("--input", str(tree), "--size", str(SIZE), "--caption_template", "{label}/{stem}")
    found = run_images(out, *flags)
    stats = json.loads((out / "stats.json").read_text())
    balanced(stats)
    counted = {k: v for k, v in stats["dropped"].items() if v}
    assert counted == {"non_utf8_name": 2, "dangling_symlink": 2, "not_a_file": 1}
    assert stats["images_in"] == 3 + 5
    assert found["non_utf8_name"] == 2 and found["dangling_symlink"] == 2
    assert stats["ignored_files"] == {"symlinked_folder": 1}
    assert written(out) == {
        b"cat/astronaut": stored(photos["astronaut.jpg"]),
        b"cat/coffee": stored(photos["coffee.png"]),
        b"dog/coins": stored(photos["coins.png"]),
    }
    said = capsys.readouterr().err
    # The launcher names each counted file under the reason stats.json counts it by.
    assert "2 files are symlinks leading to no file" in said and "dropped, dangling_symlink" in said
    assert str(tree / "fish") in said and str(tree / "cat" / "gone.jpg") in said
    assert "2 files have a path that is not UTF-8" in said and "dropped, non_utf8_name" in said
    assert repr(os.path.join(os.fsencode(tree / "cat"), b"caf\xe9.jpg")) in said  # its bytes, printable
    assert f"1 folders left out as symlinked_folder ({tree / 'bird'})" in said
    assert "unsupported_format" not in said


def test_a_glob_of_images_counts_a_name_that_is_not_utf8(tmp_path: Path) -> None:
    photos = good_images()
    (tmp_path / "a.jpg").write_bytes(photos["astronaut.jpg"])
    Path(_non_utf8(tmp_path, b"\xff.jpg")).write_bytes(photos["astronaut.jpg"])
    out = tmp_path / "out"
    run_images(out, "--input", str(tmp_path / "*.jpg"), "--size", str(SIZE), "--caption_template", "{stem}")
    stats = json.loads((out / "stats.json").read_text())
    balanced(stats)
    assert stats["dropped"]["non_utf8_name"] == 1 and stats["images_written"] == 1
    assert written(out) == {b"a": stored(photos["astronaut.jpg"])}


def test_a_row_file_whose_name_is_not_utf8_is_read(tmp_path: Path) -> None:
    """Its name only seeds each row's split draw (from its bytes); its rows are UTF-8 JSON as any other."""
    photos = good_images()
    (tmp_path / "coffee.png").write_bytes(photos["coffee.png"])
    rows = Path(_non_utf8(tmp_path, b"l\xe9gendes.jsonl"))
    rows.write_text(json.dumps({"image": "coffee.png", "caption": "a cup"}) + "\n")
    out = tmp_path / "out"
    run_images(out, "--input", str(tmp_path / "*.jsonl"), "--size", str(SIZE), "--caption_template", "x")
    stats = json.loads((out / "stats.json").read_text())
    balanced(stats)
    assert stats["images_written"] == 1
    assert written(out) == {b"a cup": stored(photos["coffee.png"])}


def _without_permission_override() -> list[str]:
    """A prefix that runs a command subject to file permissions: root keeps them only without its
    DAC capabilities (as a job in a container running as root would not have them on a mounted share)."""
    if os.geteuid() != 0:
        return []
    setpriv = shutil.which("setpriv")
    if setpriv is None:
        pytest.skip("running as root without setpriv: no file is unreadable to this process")
    return [setpriv, "--bounding-set=-dac_override,-dac_read_search", "--"]


def test_unreadable_files_rows_and_folders_are_counted_and_the_job_goes_on(tmp_path: Path) -> None:
    """Before: one file the job may not open stopped the job with a PermissionError traceback, and a
    class folder it may not list was silently left out (its images missing, nothing said)."""
    photos = good_images()
    tree = tmp_path / "tree"
    for label, name in (("cat", "astronaut.jpg"), ("cat", "locked.jpg"), ("dog", "coins.png"), ("shut", "c.png")):
        (tree / label).mkdir(parents=True, exist_ok=True)
        (tree / label / name).write_bytes(photos.get(name, photos["coffee.png"]))
    (tree / "cat" / "locked.jpg").chmod(0)
    (tree / "shut").chmod(0)
    rows = tmp_path / "rows"
    rows.mkdir()
    (rows / "coins.png").write_bytes(photos["coins.png"])
    (rows / "locked.png").write_bytes(photos["coffee.png"])
    (rows / "locked.png").chmod(0)
    lines = [{"image": "coins.png", "caption": "coins"}, {"image": "locked.png", "caption": "locked"}]
    (rows / "a.jsonl").write_text("".join(json.dumps(line) + "\n" for line in lines))
    (rows / "b.jsonl").write_text(json.dumps(lines[0]) + "\n")
    (rows / "b.jsonl").chmod(0)
    try:
        for case, flags, want, unreadable in (
            ("tree", ("--input", str(tree), "--caption_template", "{label}/{stem}"), {"cat/astronaut", "dog/coins"}, 1),
            ("rows", ("--input", str(rows / "*.jsonl"), "--caption_template", "x"), {"coins"}, 2),  # a row, a file
        ):
            out = tmp_path / f"out-{case}"
            command = [sys.executable, "-m", "dew.pipelines.cli", "images", "--output", str(out), *flags]
            done = subprocess.run(
                [*_without_permission_override(), *command, "--size", str(SIZE), *IN_MEMORY],
                capture_output=True,
                text=True,
                timeout=300,
                env={name: value for name, value in os.environ.items() if name != "DEW_VERBOSE"},
            )
            assert done.returncode == 0, done.stderr[-3000:]
            stats = json.loads((out / "stats.json").read_text())
            balanced(stats)
            assert {k: v for k, v in stats["dropped"].items() if v} == {"unreadable": unreadable}, case
            assert {caption.decode() for caption in written(out)} == want, case
            if case == "tree":
                assert stats["ignored_files"] == {"unreadable_folder": 1}
                assert f"1 folders left out as unreadable_folder ({tree / 'shut'})" in done.stderr
            else:
                assert [d["path"] for d in stats["damaged_inputs"]] == [str(rows / "b.jsonl")]
                assert stats["damaged_inputs"][0]["reason"] == "unreadable"
    finally:
        (tree / "shut").chmod(0o755)

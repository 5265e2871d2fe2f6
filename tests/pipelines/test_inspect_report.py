"""The HTML report of `dew-preprocess inspect --html`: pictures, labelled charts, escaped data, and a real
browser (headless Chromium from Debian's packages) rendering it."""

from __future__ import annotations

import io
import json
import re
import shutil
import subprocess
from pathlib import Path

import numpy as np
import pytest

from dew.pipelines import cli, svg_plots
from dew.pipelines.inspection import summarize

pytest.importorskip("PIL.Image")
HOSTILE = '<script>alert(1)</script>"><img src=x onerror=alert(2)>'
SVG_NAMESPACE = 'xmlns="http://www.w3.org/2000/svg"'


def _images(directory: Path, count: int = 40) -> Path:
    from tests.runtime.image_support import records, write_committed

    rows = records(count)
    rows[3]["caption"] = HOSTILE.encode()
    write_committed(str(directory), {"train": [rows[:30], rows[30:]], "val": [rows[:2]]})
    stats = {
        # A kind's books the report has never seen: its unit, reason and example list are read as they come.
        "pages_in": count + 4,
        "pages_written": count,
        "shards_written": 3,
        "dropped": {"near_duplicate": 3, "too_small": 1},
        "duplicates": [{"path": f"{HOSTILE}.jpg", "reason": "near_duplicate", "error": "same as #2"}],
        "drop_examples": {"too_small": {"path": "raw/a.parquet", "row": 7}},
    }
    (directory / "stats.json").write_text(json.dumps(stats))
    return directory


def _clips(directory: Path, clips: int = 3) -> Path:
    import os

    from array_record.python.array_record_module import ArrayRecordWriter
    from skimage import data

    from dew.data import formats
    from dew.data.formats import Meta, Shard
    from dew.data.sections import ClipsSection
    from dew.data.video.clip_records import pack_clip, section_fields

    section = ClipsSection(
        frames=8, frame_size=64, frame_rate=8.0, frame_encoding="jpeg", fields=section_fields(audio=False)
    )
    directory.mkdir(parents=True)
    name = formats.shard_name("train", 0, 1, "array_record")
    writer = ArrayRecordWriter(str(directory / name), "group_size:1")
    picture = data.astronaut()[::8, ::8]
    units = 0
    for n in range(clips):
        frames = np.stack([np.roll(picture, 4 * (k + n), axis=1) for k in range(8)]).astype(np.uint8)
        record = pack_clip(
            section, frames, np.zeros(0, np.float32), caption=f"clip {n} {HOSTILE}", source=f"v{n}.mp4",
            span=(0.0, 1.0), has_audio=False,
        )  # fmt: skip
        writer.write(record)
        units += len(record)
    writer.close()
    path = str(directory / name)
    shard = Shard(name, clips, units, os.path.getsize(path), formats.sha256_file(path))
    formats.write_meta(str(directory), Meta(section=section, splits={"train": (shard,)}, config={"job": "test"}))
    return directory


def _report(directory: Path, *flags: str) -> str:
    report = directory.parent / f"{directory.name}.html"
    assert cli.main(["inspect", str(directory), "--html", str(report), *flags]) == 0
    return report.read_text()


def _self_contained(page: str) -> None:
    assert "<script" not in page and HOSTILE not in page
    assert not re.search(r"(src|href)=['\"](?!data:)", page), "every picture is a data: URI"
    assert "http" not in page.replace(SVG_NAMESPACE, "")


def test_an_images_report_has_thumbnails_charts_and_escaped_captions(
    tmp_path: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    directory = _images(tmp_path / "images")
    page = _report(directory, "--sample", "20")
    text = capsys.readouterr().out
    _self_contained(page)
    assert page.count("<img alt='record ") == 30  # the whole first train shard: fewer records than 36
    assert page.count("src='data:image/jpeg;base64,") == 30
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in page
    assert "pages written of" in page and "near_duplicate" in page and "raw/a.parquet row 7" in page
    assert "captions by length (sample of 20)" in page and ">records</text>" in page
    assert "20 records spread over 30 in" in page
    # The same sections as text.
    assert "pages: 40 written of 44 read" in text and "dropped near_duplicate: 3 (e.g. " in text
    assert "sample: 20 records spread over the 30 of train-00000-of-00002.array_record" in text
    assert "caption characters: p50" in text and "image width (pixels): p50" in text
    assert "sample 0: image: " in text and "— 'photo 0 — é'" in text


def test_a_clips_report_shows_frame_strips(tmp_path: Path) -> None:
    page = _report(_clips(tmp_path / "clips"))
    _self_contained(page)
    assert page.count("<div class='clip'>") == 3 and page.count(" frame ") == 3 * 5
    assert "v2.mp4" in page and "clip 1 &lt;script&gt;" in page


def test_a_sample_stays_within_its_byte_budget(tmp_path: Path) -> None:
    from dew.data import formats
    from dew.pipelines.inspect_sample import read_sample

    directory = _images(tmp_path / "images")
    meta = formats.read_meta(str(directory))
    shard = meta.shards("train")[0]
    per_record = shard.units // shard.records
    read = read_sample(str(directory), meta, 100, budget=per_record * 4)
    assert read is not None and len(read.rows) == 4 and read.indices == [0, 10, 19, 29]


def test_counts_that_span_decades_get_a_log_axis_and_no_offsets() -> None:
    chart = svg_plots.bars("records per split", {"train": 12_345_678, "val": 1_234}, axis="records")
    assert "records (log scale)" in chart and "12,345,678" in chart and "1,234" in chart
    assert "e+" not in chart and "1e7" not in chart
    val = re.search(r'<rect class="bar" x="[\d.]+" y="[\d.]+" width="([\d.]+)"', chart.split("val</text>")[1])
    assert val is not None and float(val.group(1)) > 100, "the small bar stays visible"
    even = svg_plots.bars("records per split", {"train": 900, "val": 100}, axis="records")
    assert "(log scale)" not in even
    assert svg_plots.number(12_000_000) == "12,000,000" and svg_plots.number(0.25) == "0.25"


def test_summarize_reads_the_books_of_any_kind(tmp_path: Path) -> None:
    stats = summarize(str(_images(tmp_path / "images"))).stats
    assert stats["read"] == {"count": 44, "unit": "pages"} and stats["written"] == {"count": 40, "unit": "pages"}
    assert stats["drop_examples"]["near_duplicate"]["error"] == "same as #2"


def _chromium() -> str:
    found = shutil.which("chromium") or shutil.which("chromium-browser")
    if found is None:
        pytest.skip("chromium is not installed: `make setup` installs it as root on Debian (apt-get install chromium)")
    return found


def _headless(browser: str, *args: str) -> subprocess.CompletedProcess[str]:
    flags = ["--headless", "--no-sandbox", "--disable-gpu", "--no-first-run", "--disable-dev-shm-usage"]
    return subprocess.run([browser, *flags, *args], capture_output=True, text=True, timeout=120, check=True)


def test_the_report_renders_in_headless_chromium(tmp_path: Path) -> None:
    from PIL import Image

    browser = _chromium()
    directory = _images(tmp_path / "images")
    _report(directory)
    url = (tmp_path / "images.html").as_uri()
    dom = _headless(browser, "--dump-dom", url).stdout
    assert dom.count('<img alt="record ') == 30 and 'src="data:image/jpeg;base64,' in dom
    assert "caption length (characters, power-of-two buckets)" in dom and "records (log scale)" not in dom
    assert "&lt;script&gt;alert(1)&lt;/script&gt;" in dom and "<script" not in dom
    shot = tmp_path / "report.png"
    _headless(browser, f"--screenshot={shot}", "--window-size=1200,2400", "--hide-scrollbars", url)
    pixels = np.asarray(Image.open(io.BytesIO(shot.read_bytes())).convert("RGB"))
    assert pixels.shape[:2] == (2400, 1200)
    # Rendered, not blank: many colours (text, blue bars, thumbnails), not one background.
    assert len(np.unique(pixels.reshape(-1, 3), axis=0)) > 1000

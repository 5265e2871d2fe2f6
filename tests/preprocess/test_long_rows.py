"""A row longer than any list row should be (a file with no line breaks, a runaway field) is dropped by
reason or ends the file as damage, and is never held whole: every reader of jsonl and csv lists reads
lines in bounded pieces (dew.preprocess.document_rows.bounded_lines and csv_rows.csv_records).
"""

from __future__ import annotations

import io
import json
import tracemalloc
from pathlib import Path

import pytest

from dew.preprocess import clip_sources, image_reading
from dew.preprocess.csv_rows import csv_records
from dew.preprocess.document_rows import MAX_ROW_BYTES, DamagedInput, bounded_lines
from dew.preprocess.image_reading import ImageReadOptions, ReadSource
from dew.preprocess.image_sources import Source
from dew.preprocess.url_reading import _ReadUrlSource

pytestmark = pytest.mark.beam
LIMIT = 1024


def test_bounded_lines_gives_none_for_a_long_line_and_reads_on() -> None:
    data = b"one\n" + b"x" * (LIMIT + 3) + b"\n" + b"y" * LIMIT + b"\r\nlast"
    assert list(bounded_lines(io.BytesIO(data), LIMIT)) == [b"one\n", None, b"y" * LIMIT + b"\r\n", b"last"]
    assert list(bounded_lines(io.BytesIO(b"z" * (5 * LIMIT)), LIMIT)) == [None]


def test_a_line_with_no_end_is_read_in_bounded_memory() -> None:
    """64 MiB with no line break: the default limit (16 MiB) is what is held, not the line."""
    data = io.BytesIO(b"a" * (MAX_ROW_BYTES * 4))
    tracemalloc.start()
    try:
        assert list(bounded_lines(data, MAX_ROW_BYTES)) == [None]
        peak = tracemalloc.get_traced_memory()[1]
    finally:
        tracemalloc.stop()
    assert peak < 1.25 * MAX_ROW_BYTES < len(data.getvalue())  # the line held once, read past in 1 MiB pieces


def test_a_long_jsonl_row_is_too_long_and_its_neighbours_are_read(tmp_path: Path, monkeypatch) -> None:
    monkeypatch.setattr(image_reading, "MAX_ROW_BYTES", LIMIT)
    monkeypatch.setattr(clip_sources, "MAX_ROW_BYTES", LIMIT)
    long = json.dumps({"image": "b.jpg", "url": "http://127.0.0.1/b", "path": "b.mp4", "caption": "z" * 2 * LIMIT})
    lines = [
        json.dumps({"image": f"{n}.jpg", "url": f"http://127.0.0.1/{n}", "path": f"{n}.mp4", "caption": n})
        for n in "ac"
    ]
    rows = tmp_path / "rows.jsonl"
    rows.write_text(f"{lines[0]}\n{long}\n{lines[1]}\n")
    source = Source(index=0, kind="jsonl", path=str(rows), name=rows.name)

    found = [
        (row, values.get("caption"), reason)
        for row, values, reason in ReadSource(ImageReadOptions())._jsonl_rows(source)
    ]
    assert found == [(0, "a", None), (1, None, "too_long"), (2, "c", None)]
    urls = list(_ReadUrlSource(ImageReadOptions(image_field="url"))._rows(source))
    assert [(row, url, reason) for row, url, _, reason in urls] == [
        (0, b"http://127.0.0.1/a", None),
        (1, None, "too_long"),
        (2, b"http://127.0.0.1/c", None),
    ]
    listed = list(clip_sources._rows(str(rows), ("path", "caption")))
    assert [(values.get("path"), reason) for values, reason, _ in listed] == [
        ("a.mp4", None),
        (None, "too_long"),
        ("c.mp4", None),
    ]
    assert listed[1][2] == f"line 2 is longer than {LIMIT:,} bytes"
    assert "too_long" in image_reading.NEWER_REASONS and "too_long" in clip_sources.LIST_REASONS


def test_a_long_csv_line_ends_the_list_as_corrupt_input_after_the_rows_before() -> None:
    """csv cannot tell where the next row starts after a line it did not read (a quoted field may hold line
    breaks), so the rest of the file is the damage, counted once by the caller."""
    data = (
        b"url,caption\nhttp://127.0.0.1/a,one\nhttp://127.0.0.1/b,"
        + b"z" * (2 * LIMIT)
        + b"\nhttp://127.0.0.1/c,three\n"
    )
    got = []
    with pytest.raises(DamagedInput) as raised:
        for values, _ in csv_records(io.BytesIO(data), limit=LIMIT):
            got.append(values)
    assert got == [{"url": "http://127.0.0.1/a", "caption": "one"}]
    assert (
        raised.value.reason == "corrupt_input"
        and str(raised.value) == f"csv: line 3 is longer than {LIMIT:,} characters"
    )
    quoted = b'url,caption\nhttp://127.0.0.1/a,"two\nlines"\nhttp://127.0.0.1/b,x\n'
    assert [v["caption"] for v, _ in csv_records(io.BytesIO(quoted), limit=LIMIT)] == ["two\nlines", "x"]


def test_a_csv_field_past_the_csv_modules_own_limit_is_a_row_like_any_other() -> None:
    """csv refuses a field over 128 Ki characters by default; a caption that long is still far under
    MAX_ROW_BYTES, so it is read, and so are the rows after it."""
    caption = "z" * 200_000
    data = f"url,caption\nhttp://127.0.0.1/a,{caption}\nhttp://127.0.0.1/b,two\n".encode()
    assert [v["caption"] for v, _ in csv_records(io.BytesIO(data))] == [caption, "two"]
    quoted = f'url,caption\nhttp://127.0.0.1/a,"{caption}\n{caption}"\nhttp://127.0.0.1/b,two\n'.encode()
    assert [len(v["caption"]) for v, _ in csv_records(io.BytesIO(quoted))] == [2 * len(caption) + 1, 3]


def test_a_csv_row_with_more_fields_than_the_header_is_malformed_csv_not_its_first_fields(tmp_path: Path) -> None:
    """An unquoted comma in a caption splits it: csv.DictReader would keep 'hello' as the caption and put
    ' world' aside. Which comma split it cannot be told, so the row is dropped by reason, in url lists and
    video lists alike, and the rows around it are read; a row with fewer fields lacks its caption."""
    data = b"url,caption\nhttp://127.0.0.1/a,one\nhttp://127.0.0.1/b,hello, world\nhttp://127.0.0.1/c\nhttp://127.0.0.1/d,four\n"
    assert list(csv_records(io.BytesIO(data))) == [
        ({"url": "http://127.0.0.1/a", "caption": "one"}, None),
        ({}, "malformed_csv"),
        ({"url": "http://127.0.0.1/c", "caption": None}, None),
        ({"url": "http://127.0.0.1/d", "caption": "four"}, None),
    ]
    urls = tmp_path / "urls.csv"
    urls.write_bytes(data)
    got = list(
        _ReadUrlSource(ImageReadOptions(image_field="url"))._rows(Source(index=0, kind="csv", path=str(urls), name="u"))
    )
    assert [(row, url, reason) for row, url, _, reason in got] == [
        (0, b"http://127.0.0.1/a", None),
        (1, None, "malformed_csv"),
        (2, None, "missing_field"),
        (3, b"http://127.0.0.1/d", None),
    ]
    videos = tmp_path / "videos.csv"
    videos.write_bytes(data.replace(b"url,", b"path,"))
    listed = list(clip_sources._rows(str(videos), ("path", "caption")))
    assert [reason for _, reason, _ in listed] == [None, "malformed_csv", None, None]
    assert "malformed_csv" in image_reading.NEWER_REASONS and "malformed_csv" in clip_sources.LIST_REASONS

"""decode-clips' lists of videos (clip_sources): a .jsonl or .csv list reads the same plain, .gz or .zst;
a row that is not JSON, not a JSON object or not UTF-8 is counted under its reason while its neighbours
are read; a list cut short or corrupted keeps the rows before the damage and counts its lost rest, and
the job's books balance with every one of them."""

from __future__ import annotations

import csv
import dataclasses
import hashlib
import io
import json
from pathlib import Path

import pytest

from dew.preprocess.clip_sources import Source, SourceOptions, find_sources
from tests.preprocess.test_decode_clips import CLIP, run
from tests.preprocess.test_images_job import compressed, listing
from tests.runtime.video_support import write_video

COMPRESSED = (".gz", ".zst", ".zstd")


def _caption(i: int) -> str:
    """A caption that compresses as little as a real one, the same on every run."""
    return hashlib.sha256(str(i).encode()).hexdigest()[:16]


def _text(rows: list[dict[str, str]], kind: str) -> bytes:
    if kind == "jsonl":
        return "".join(json.dumps(row) + "\n" for row in rows).encode()
    out = io.StringIO()
    writer = csv.DictWriter(out, fieldnames=["path", "caption"], lineterminator="\n")
    writer.writeheader()
    writer.writerows(rows)
    return out.getvalue().encode()


def _write(path: Path, data: bytes) -> Path:
    """`data` stored at `path`, compressed as its name says (one gzip member or zstd frame)."""
    suffix = path.suffix.lower()
    path.write_bytes(compressed([data], suffix)[0] if suffix in COMPRESSED else data)
    return path


def _cut(path: Path, text: bytes) -> Path:
    """`text` compressed as `path` names, its last row alone in the last gzip member or zstd frame, and
    cut halfway into that one: every row before it is whole, and the reader must count the damage."""
    last = text.rindex(b"\n", 0, len(text) - 1) + 1
    data, offset = compressed([text[:last], text[last:]], path.suffix.lower())
    path.write_bytes(data[: offset + (len(data) - offset) // 2])
    return path


def _as_of(sources: tuple[Source, ...], listed: Path) -> list[Source]:
    """The Sources with the list's own name spelled <list>, where a bad row names it."""
    return [
        dataclasses.replace(s, path=s.path.replace(str(listed), "<list>"), name=s.name.replace(str(listed), "<list>"))
        for s in sources
    ]


@pytest.fixture(scope="module")
def videos(tmp_path_factory: pytest.TempPathFactory) -> Path:
    root = tmp_path_factory.mktemp("listed") / "videos"
    root.mkdir()
    write_video(str(root / "tone.mp4"), frames=25)
    write_video(str(root / "quiet.mp4"), codec="mpeg4", frames=25, audio=False)
    return root


ROWS = [
    {"path": "videos/tone.mp4", "caption": "a tone"},
    {"path": "videos/gone.mp4", "caption": "no such video"},
    {"path": "", "caption": "no path"},
    {"path": "videos/quiet.mp4", "caption": "quiet, 1,2"},
]


@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_plain_gz_and_zst_list_give_the_same_sources(videos: Path, kind: str) -> None:
    plain = _write(videos.parent / f"list.{kind}", _text(ROWS, kind))
    want = _as_of(find_sources([str(plain)], SourceOptions())[0], plain)
    assert [(s.caption, s.problem) for s in want] == [  # in path order: <list> row 2, then videos/
        ("", "missing_field"),
        ("no such video", "missing_file"),
        ("quiet, 1,2", None),
        ("a tone", None),
    ]
    for suffix in COMPRESSED:
        listed = _write(
            videos.parent / f"list.{kind}{suffix.upper() if suffix == '.gz' else suffix}", _text(ROWS, kind)
        )
        assert _as_of(find_sources([str(listed)], SourceOptions())[0], listed) == want, suffix


@pytest.mark.parametrize("suffix", [".gz", ".zst"])
@pytest.mark.parametrize("kind", ["jsonl", "csv"])
def test_a_list_cut_short_keeps_the_rows_before_the_cut_and_counts_the_rest(
    tmp_path: Path, kind: str, suffix: str
) -> None:
    rows = [{"path": f"v{i:03d}.mp4", "caption": _caption(i)} for i in range(400)]  # 20 KB of list
    listed = _cut(tmp_path / f"list.{kind}{suffix}", _text(rows, kind))
    sources, manifest = find_sources([str(listed)], SourceOptions())
    kept = [s.caption for s in sources if s.problem == "missing_file"]
    # The rows before the cut stand, as many as reached the line reader: every whole zstd frame's, and
    # gzip's up to the last buffer it filled (it fills one across members, as in the images job).
    assert kept == [r["caption"] for r in rows[: len(kept)]] and 0 < len(kept) < len(rows)
    if suffix == ".zst":
        assert len(kept) == len(rows) - 1
    (cut,) = [s for s in sources if s.problem != "missing_file"]
    assert (cut.path, cut.problem) == (f"{listed} row {len(kept)}", "truncated_input")
    assert f"the list breaks off at row {len(kept)}" in cut.detail and [f.path for f in manifest] == [str(listed)]


def test_a_list_that_is_no_gzip_or_whose_bytes_go_wrong_is_corrupt_input(tmp_path: Path) -> None:
    rows = [{"path": f"v{i:02d}.mp4", "caption": _caption(i)} for i in range(20)]
    not_gzip = tmp_path / "plain-named.jsonl.gz"
    not_gzip.write_bytes(_text(rows, "jsonl"))
    (bad,) = find_sources([str(not_gzip)], SourceOptions())[0]
    assert (bad.path, bad.problem) == (f"{not_gzip} row 0", "corrupt_input")
    damaged = _write(tmp_path / "damaged.jsonl.zst", _text(rows, "jsonl"))
    data = bytearray(damaged.read_bytes())
    data[len(data) // 2 :] = bytes(255 - b for b in data[len(data) // 2 :])
    damaged.write_bytes(bytes(data))
    assert "corrupt_input" in {s.problem for s in find_sources([str(damaged)], SourceOptions())[0]}


def test_a_parquet_list_reads_as_the_jsonl_one_and_without_its_footer_is_truncated_input(videos: Path) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    listed, plain = videos.parent / "list.parquet", _write(videos.parent / "rows.jsonl", _text(ROWS, "jsonl"))
    pq.write_table(pa.Table.from_pylist([{**row, "score": 1.0} for row in ROWS]), listed, row_group_size=3)
    want = _as_of(find_sources([str(plain)], SourceOptions())[0], plain)
    assert _as_of(find_sources([str(listed)], SourceOptions())[0], listed) == want
    listed.write_bytes(listed.read_bytes()[:-20])
    (cut,) = find_sources([str(listed)], SourceOptions())[0]
    assert (cut.path, cut.problem) == (f"{listed} row 0", "truncated_input") and cut.detail.startswith("parquet: ")


def test_a_bad_line_is_counted_under_its_reason_and_its_neighbours_are_read(tmp_path: Path) -> None:
    lines = [
        json.dumps({"path": "a.mp4", "caption": "first"}).encode(),
        b'{"path": "b.mp4", "caption": ',  # cut mid-line by a tool
        b'["c.mp4", "a list, not an object"]',
        b"",  # a blank line is no row
        json.dumps({"path": "d.mp4", "caption": "caf\xe9"}, ensure_ascii=False).encode("latin-1"),
        json.dumps({"path": "e.mp4", "caption": "lone \ud800"}).encode(),
        json.dumps({"path": "f.mp4", "caption": "last"}).encode(),
    ]
    listed = _write(tmp_path / "list.jsonl.gz", b"\n".join(lines) + b"\n")
    sources, _ = find_sources([str(listed)], SourceOptions())
    found = {Path(s.path).name: (s.caption, s.problem, s.detail) for s in sources}
    assert found.pop("a.mp4") == ("first", "missing_file", "") and found.pop("f.mp4") == ("last", "missing_file", "")
    malformed = found.pop("list.jsonl.gz row 1")
    assert malformed[1] == "malformed_json" and malformed[2].startswith("line 2 is not JSON (")
    assert found == {
        "list.jsonl.gz row 2": ("", "malformed_json", "line 3 is no JSON object"),
        "list.jsonl.gz row 3": ("", "invalid_utf8", "line 5 is not UTF-8"),
        "list.jsonl.gz row 4": ("", "invalid_utf8", "its path or caption is not UTF-8"),
    }


def test_a_csv_cell_that_is_not_utf8_drops_its_row_only(tmp_path: Path) -> None:
    listed = tmp_path / "list.csv.zst"
    _write(listed, b"path,caption\na.mp4,first\nb.mp4,caf\xe9\nc.mp4,last\n")
    sources, _ = find_sources([str(listed)], SourceOptions())
    assert sorted((Path(s.path).name, s.caption, s.problem) for s in sources) == [
        ("a.mp4", "first", "missing_file"),
        ("c.mp4", "last", "missing_file"),
        ("list.csv.zst row 1", "", "invalid_utf8"),
    ]


def test_a_compressed_list_that_is_not_jsonl_or_csv_is_refused_by_name(tmp_path: Path) -> None:
    listed = _write(tmp_path / "list.parquet.gz", b"PAR1")
    with pytest.raises(ValueError, match=r"list\.parquet\.gz: not a video .* csv/jsonl also \.gz, \.zst, \.zstd"):
        find_sources([str(listed)], SourceOptions())


@pytest.mark.beam
def test_a_compressed_list_writes_the_clips_of_the_plain_one_and_the_books_count_every_row(
    videos: Path, tmp_path: Path
) -> None:
    rows = [json.dumps(ROWS[0]).encode(), b"{not json", json.dumps(ROWS[3]).encode()]
    plain = _write(videos.parent / "same.jsonl", b"\n".join(rows) + b"\n")
    packed = _write(videos.parent / "same.jsonl.zst", b"\n".join(rows) + b"\n")
    # A second list cut short, in a folder sorting after the videos: the good videos keep their numbers.
    (videos.parent / "z").mkdir(exist_ok=True)
    cut_rows = [{"path": f"v{i}.mp4", "caption": _caption(i)} for i in range(3)]
    cut = _cut(videos.parent / "z" / "cut.csv.zst", _text(cut_rows, "csv"))
    flags = (*CLIP, "--every", "0.4", "--num_shards", "2")
    run(tmp_path / "plain", "--input", str(plain), *flags)
    found = run(tmp_path / "packed", "--input", str(packed), "--input", str(cut), *flags)
    shards = {name: digest for name, digest in listing(tmp_path / "plain").items() if name.startswith("train-")}
    assert shards and {name: listing(tmp_path / "packed")[name] for name in shards} == shards

    stats = json.loads((tmp_path / "packed" / "stats.json").read_text())
    dropped = {reason: n for reason, n in stats["dropped"].items() if n}
    assert dropped == {"malformed_json": 1, "missing_file": 2, "truncated_input": 1}
    assert stats["videos_in"] == 6 == stats["videos_written"] + sum(dropped.values()) == found["videos_in"]
    assert found["malformed_json"] == found["truncated_input"] == 1
    errors = {d["reason"]: d["error"] for d in stats["dropped_inputs"]}
    assert errors["malformed_json"].startswith(f"{packed} row 1: line 2 is not JSON (")
    assert errors["truncated_input"].startswith(f"{cut} row 2: zstd: ")


def test_a_list_naming_one_video_in_several_rows_gives_a_source_a_caption(videos: Path) -> None:
    """MSR-VTT-style lists give a video once a caption; the last caption used to win and the others were
    lost uncounted. A list named by two patterns is still read once, and a video reached by its folder
    and a list is still one source."""
    listed = videos.parent / "captions.jsonl"
    rows = [{"path": "videos/tone.mp4", "caption": f"caption {i}"} for i in range(3)]
    rows.insert(1, {"path": "videos/quiet.mp4", "caption": "quiet"})
    listed.write_text("".join(json.dumps(row) + "\n" for row in rows))
    sources, _ = find_sources([str(listed), str(listed.parent / "captions.js*")], SourceOptions())
    assert [(Path(s.path).name, s.caption) for s in sources] == [
        ("quiet.mp4", "quiet"),
        ("tone.mp4", "caption 0"),
        ("tone.mp4", "caption 1"),
        ("tone.mp4", "caption 2"),
    ]
    assert [s.index for s in sources] == [0, 1, 2, 3] and all(s.problem is None for s in sources)


def test_every_list_naming_a_video_keeps_its_rows_and_a_folder_adds_no_source_beside_them(videos: Path) -> None:
    """Two lists given as two --input patterns, each naming one video under a caption of its own: the
    later list's row used to replace the earlier's, uncounted. A folder that holds a listed video gave it
    a source with the folder's caption, or replaced the list's row, as the flags' order fell."""
    first, second = videos.parent / "first.jsonl", videos.parent / "second.jsonl"
    first.write_text(json.dumps({"path": "videos/tone.mp4", "caption": "from first"}) + "\n")
    second.write_text(json.dumps({"path": "videos/tone.mp4", "caption": "from second"}) + "\n")
    both = [("tone.mp4", "from first"), ("tone.mp4", "from second")]
    for patterns in ([first, second], [second, first]):
        sources, _ = find_sources([str(p) for p in patterns], SourceOptions())
        assert [(Path(s.path).name, s.caption) for s in sources] == both
    folder = [("quiet.mp4", "quiet"), *both]
    for patterns in ([videos, first, second], [first, videos, second], [second, first, videos]):
        sources, _ = find_sources([str(p) for p in patterns], SourceOptions())
        assert [(Path(s.path).name, s.caption) for s in sources] == folder
        assert [s.index for s in sources] == [0, 1, 2]

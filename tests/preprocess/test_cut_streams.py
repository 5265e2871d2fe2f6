"""A compressed row file cut short keeps every whole row it still holds, in every reader of row files.

The rows before a cut are not only a prefix of the file's rows: they are all of the rows whose line the
cut left whole. A row lost just before the cut is lost without a count (the cut counts once, as one
damaged input), which is a silent loss. An io.BufferedReader over gzip lost up to 8 KiB of rows so, and
codecs' stream reader (ingest-urls' csv lists) a few. Here the expectation is computed from the cut
bytes themselves, by decompressing them with zlib or zstandard directly, at hypothesis-drawn cuts
across many buffers' worth of rows, for the text jobs' reader, the images job's jsonl rows, ingest-urls'
csv and jsonl lists and decode-clips' lists.
"""

from __future__ import annotations

import gzip
import json
import zlib
from collections.abc import Callable, Iterator
from pathlib import Path

import pytest
from hypothesis import HealthCheck, given, settings
from hypothesis import strategies as st

from dew.preprocess.document_rows import DamagedInput, DocumentRows, ReadOptions

zstandard = pytest.importorskip("zstandard")
pytestmark = pytest.mark.beam

ROWS = 6000
JSONL = "".join(
    json.dumps({"text": f"document {i} " + "words " * (i % 23), "url": f"http://127.0.0.1/{i}", "caption": f"c{i}"})
    + "\n"
    for i in range(ROWS)
).encode()
CSV = ("url,caption\n" + "".join(f"http://127.0.0.1/{i},caption {i} {'y' * (i % 31)}\n" for i in range(ROWS))).encode()
# Several zstd frames, so a cut can fall in any of them.
FRAMES = 4


def _compress(data: bytes, compression: str) -> bytes:
    if compression == "gz":
        return gzip.compress(data, mtime=0)
    step = -(-len(data) // FRAMES)
    return b"".join(zstandard.ZstdCompressor().compress(data[i : i + step]) for i in range(0, len(data), step))


def _decodable(cut: bytes, compression: str) -> bytes:
    """Every byte the cut stream still decodes to, found without dew's reader."""
    if compression == "gz":
        return zlib.decompressobj(31).decompress(cut)
    out, rest = [], cut
    while rest:
        frame = zstandard.ZstdDecompressor().decompressobj()
        out.append(frame.decompress(rest))
        if not frame.eof:
            break
        rest = frame.unused_data
    return b"".join(out)


COMPRESSED = {(kind, c): _compress(data, c) for kind, data in (("jsonl", JSONL), ("csv", CSV)) for c in ("gz", "zst")}


def _documents(path: str) -> Iterator[object]:
    with open(path, "rb") as raw:
        yield from DocumentRows(path, ReadOptions(text_field="text")).read(raw)


def _image_rows(path: str) -> Iterator[object]:
    from dew.preprocess.image_reading import ImageReadOptions, ReadSource
    from dew.preprocess.image_sources import Source

    yield from ReadSource(ImageReadOptions(image_field="url"))._jsonl_rows(
        Source(index=0, kind="jsonl", path=path, name="x")
    )


def _url_rows(path: str) -> Iterator[object]:
    from dew.preprocess.image_reading import ImageReadOptions
    from dew.preprocess.image_sources import Source
    from dew.preprocess.url_reading import _ReadUrlSource

    reader = _ReadUrlSource(ImageReadOptions(image_field="url"))
    kind = "csv" if ".csv" in path else "jsonl"
    yield from reader._rows(Source(index=0, kind=kind, path=path, name="x"))


def _clip_rows(path: str) -> Iterator[object]:
    from dew.preprocess.clip_sources import _rows

    yield from _rows(path, ("path", "caption"))


READERS: dict[str, tuple[Callable[[str], Iterator[object]], tuple[str, ...]]] = {
    "text jobs (DocumentRows)": (_documents, ("jsonl",)),
    "images job rows": (_image_rows, ("jsonl",)),
    "ingest-urls lists": (_url_rows, ("jsonl", "csv")),
    "decode-clips lists": (_clip_rows, ("jsonl", "csv")),
}
CASES = [(name, kind, c) for name, (_, kinds) in READERS.items() for kind in kinds for c in ("gz", "zst")]


@pytest.mark.parametrize(("reader", "kind", "compression"), CASES)
@settings(max_examples=12, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(fraction=st.floats(0.02, 0.999))
def test_a_cut_stream_keeps_every_whole_row_before_the_cut(
    tmp_path: Path, reader: str, kind: str, compression: str, fraction: float
) -> None:
    data = COMPRESSED[kind, compression]
    cut = data[: max(11, int(len(data) * fraction))]
    path = tmp_path / f"list.{kind}.{compression}"
    path.write_bytes(cut)
    # A zstd block decodes only whole (up to 128 KiB), so a cut can leave no line at all, nor a csv's header.
    whole_lines = max(0, _decodable(cut, compression).count(b"\n") - (kind == "csv"))  # the header is no row
    rows, damaged = 0, None
    try:
        for _ in READERS[reader][0](str(path)):
            rows += 1
    except DamagedInput as damage:
        damaged = damage.reason
    if whole_lines == ROWS:  # the cut fell past the last row (in gzip's trailer, or between zstd frames)
        assert rows == ROWS
    else:
        assert (rows, damaged) == (whole_lines, "truncated_input")


@pytest.mark.parametrize("reader", ["ingest-urls lists", "decode-clips lists"])
def test_a_plain_csv_ending_inside_a_quoted_field_counts_that_row_as_damage(tmp_path: Path, reader: str) -> None:
    """A quote opened and never closed (a stray quote, or a plain file cut inside a quoted field): csv
    gives one last row whose field holds the rest of the file, the rows after the quote lost inside it."""
    head = b"url,path,caption\nhttp://127.0.0.1/a,a.mp4,one\n"
    path = tmp_path / "list.csv"
    path.write_bytes(head + b'http://127.0.0.1/b,b.mp4,"two\nhttp://127.0.0.1/c,c.mp4,three\n')
    rows = []
    with pytest.raises(DamagedInput) as raised:
        rows.extend(READERS[reader][0](str(path)))
    assert len(rows) == 1 and raised.value.reason == "corrupt_input"
    assert str(raised.value).startswith("csv: the file ends inside a quoted field opened in the row from line 3")
    path.write_bytes(head.split(b"\n")[0] + b'\nhttp://127.0.0.1/b,b.mp4,"two\nhttp://127.0.0.1/c,c.mp4,three\n')
    with pytest.raises(DamagedInput, match="from line 2"):  # the first row's
        list(READERS[reader][0](str(path)))
    path.write_bytes(b'"url,path,caption\n' + head.split(b"\n", 1)[1])  # the header's own quote
    with pytest.raises(DamagedInput, match="from line 1"):
        list(READERS[reader][0](str(path)))
    # A quoted field closed at the very end, and a header alone without a line break, are whole files.
    path.write_bytes(head + b'http://127.0.0.1/b,b.mp4,"two\nlines"')
    assert len(list(READERS[reader][0](str(path)))) == 2
    path.write_bytes(b"url,path,caption")
    assert list(READERS[reader][0](str(path))) == []


@pytest.mark.parametrize(("reader", "kind", "compression"), CASES)
def test_an_empty_compressed_file_is_truncated_input_and_an_empty_plain_one_no_rows(
    tmp_path: Path, reader: str, kind: str, compression: str
) -> None:
    """No gzip member or zstd frame is 0 bytes long (gzip -t and zstd -t refuse such a file): it is a
    copy cut before its first byte, whose rows are lost, so it is counted. The compressed empty text
    and a plain file of 0 bytes are whole files of no row."""
    read = READERS[reader][0]
    path = tmp_path / f"list.{kind}.{compression}"
    path.write_bytes(b"")
    with pytest.raises(DamagedInput) as raised:
        list(read(str(path)))
    assert raised.value.reason == "truncated_input" and "0 bytes" in str(raised.value)
    path.write_bytes(gzip.compress(b"") if compression == "gz" else zstandard.ZstdCompressor().compress(b""))
    assert list(read(str(path))) == []
    plain = tmp_path / f"list.{kind}"
    plain.write_bytes(b"")
    assert list(read(str(plain))) == []

"""Damaged and missing inputs are counted, never silent: cut and corrupted zstd, gzip and parquet files,
symlinks that lead nowhere, and the leftovers of a run killed right after its commit.

The read step's DoFn is driven directly (no pipeline), so every truncation offset costs microseconds.
"""

from __future__ import annotations

import gzip
import io
import itertools
import json
import os
from pathlib import Path

import pytest
from apache_beam.pvalue import TaggedOutput
from hypothesis import HealthCheck, example, given, settings
from hypothesis import strategies as st

from dew.preprocess import commit, files
from dew.preprocess.read_documents import BadInputError, ReadOptions, _ReadFile, merge_tallies
from tests.preprocess.corpora import topics

pytestmark = pytest.mark.beam
TEXTS = topics(40)
LINES = [(json.dumps({"text": t}) + "\n").encode() for t in TEXTS]
FRAMES = (0, 15, 30, 40)  # the zstd input is three frames of these rows


def _zstd_frames() -> tuple[bytes, dict[int, int]]:
    """The jsonl as three zstd frames, and for each frame end (an offset) the rows before it."""
    import zstandard

    blob, ends = b"", {}
    for start, stop in itertools.pairwise(FRAMES):
        blob += zstandard.ZstdCompressor(write_checksum=True).compress(b"".join(LINES[start:stop]))
        ends[len(blob)] = stop
    return blob, ends


ZSTD, ZSTD_ENDS = _zstd_frames()
GZIP = gzip.compress(b"".join(LINES), mtime=0)


def read(path: Path, **options: object) -> tuple[list[tuple[tuple[int, int], str]], dict]:
    """(documents, merged tally) of one file through the read step's DoFn."""
    fn = _ReadFile(ReadOptions(**options))  # type: ignore[arg-type]
    fn.setup()
    documents, tallies = [], []
    for out in fn.process((0, str(path))):
        if isinstance(out, TaggedOutput):
            tallies.append(out.value)
        else:
            documents.append(out)
    return documents, merge_tallies(tallies)


def assert_cut(path: Path, documents: list, tally: dict, reason: str, lost: int = 1) -> None:
    """The rows before the damage are kept whole and in order; the rest is counted once, by path."""
    assert documents == [((0, row), TEXTS[row]) for row in range(len(documents))]
    assert tally[reason] == lost and tally["files_unreadable"] == 1
    assert tally["documents_in"] == len(documents) + lost == tally["documents_read"] + lost
    assert tally["malformed_json"] == 0  # the half line at the cut is part of the lost rest, not a row
    (damaged,) = tally["damaged_inputs"]
    assert damaged["path"] == str(path) and damaged["reason"] == reason and damaged["rows_read"] == len(documents)


@pytest.fixture(scope="module")
def work(tmp_path_factory: pytest.TempPathFactory) -> Path:
    return tmp_path_factory.mktemp("inputs")


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(1, len(ZSTD) - 1))
@example(cut=len(ZSTD) - 1).via("the last byte of the checksum")
@example(cut=next(iter(ZSTD_ENDS))).via("exactly between two frames")
def test_cut_zstd_keeps_the_rows_before_and_counts_the_rest(work: Path, cut: int) -> None:
    path = work / f"cut-{cut}.jsonl.zst"
    path.write_bytes(ZSTD[:cut])
    documents, tally = read(path)
    if cut in ZSTD_ENDS:
        # Between frames a cut leaves a whole, shorter file: zstd has no end-of-stream mark to miss.
        assert documents == [((0, row), TEXTS[row]) for row in range(ZSTD_ENDS[cut])]
        assert tally["truncated_input"] == 0
    else:
        assert_cut(path, documents, tally, "truncated_input")
        assert len(documents) >= max([rows for end, rows in ZSTD_ENDS.items() if end < cut], default=0)


def test_whole_zstd_of_several_frames_reads_every_row(work: Path) -> None:
    path = work / "whole.jsonl.zst"
    path.write_bytes(ZSTD)
    documents, tally = read(path)
    assert documents == [((0, row), text) for row, text in enumerate(TEXTS)]
    assert tally["files_unreadable"] == 0 and tally["damaged_inputs"] == []


def test_zstd_with_garbage_after_its_frames_is_corrupt(work: Path) -> None:
    path = work / "garbage.jsonl.zst"
    path.write_bytes(ZSTD + b"not a frame")
    documents, tally = read(path)
    assert len(documents) == len(TEXTS) and tally["corrupt_input"] == 1


@settings(max_examples=40, deadline=None, suppress_health_check=[HealthCheck.function_scoped_fixture])
@given(cut=st.integers(10, len(GZIP) - 1))  # from past the fixed 10-byte header to inside the trailer
@example(cut=len(GZIP) - 1)
def test_cut_gzip_keeps_the_rows_before_and_counts_the_rest(work: Path, cut: int) -> None:
    path = work / f"cut-{cut}.jsonl.gz"
    path.write_bytes(GZIP[:cut])
    documents, tally = read(path)
    assert_cut(path, documents, tally, "truncated_input")


def test_cut_txt_document_too_long_to_hold_is_still_verified(work: Path) -> None:
    path = work / "cut.txt.gz"
    whole = gzip.compress(TEXTS[0].encode() * 4, mtime=0)
    path.write_bytes(whole[:-3])
    documents, tally = read(path, max_document_bytes=100)
    assert documents == [] and tally["too_long"] == 0 and tally["truncated_input"] == 1


def test_gzip_crc_mismatch_is_corrupt_and_strict_names_the_file(work: Path) -> None:
    damaged = bytearray(GZIP)
    damaged[-8] ^= 0x01  # the CRC32 of the trailer: every byte decodes, the check at the end fails
    path = work / "crc.jsonl.gz"
    path.write_bytes(bytes(damaged))
    documents, tally = read(path)
    # The CRC is known only at the end: the rows decoded before the last read stand (documented).
    assert_cut(path, documents, tally, "corrupt_input")
    assert len(documents) > len(TEXTS) // 2 and "CRC" in tally["damaged_inputs"][0]["error"]
    with pytest.raises(BadInputError, match=rf"{path}: corrupt input after \d+ rows .*CRC"):
        read(path, strict=True)


def _parquet(path: Path) -> bytes:
    import pyarrow as pa
    import pyarrow.parquet as pq

    buffer = io.BytesIO()
    pq.write_table(pa.table({"text": TEXTS}), buffer, row_group_size=10)
    return buffer.getvalue()


@pytest.mark.parametrize("keep", [5, 0.5, -1])
def test_cut_parquet_loses_its_footer_and_is_counted(work: Path, keep: float) -> None:
    whole = _parquet(work)
    cut = int(len(whole) * keep) if isinstance(keep, float) else keep % len(whole)
    path = work / f"cut-{cut}.parquet"
    path.write_bytes(whole[:cut])
    documents, tally = read(path)
    assert_cut(path, documents, tally, "truncated_input")


def test_parquet_with_a_corrupt_row_group_keeps_the_groups_before_and_counts_the_rows_after(work: Path) -> None:
    import pyarrow.parquet as pq

    whole = bytearray(_parquet(work))
    column = pq.ParquetFile(io.BytesIO(bytes(whole))).metadata.row_group(2).column(0)
    start = column.dictionary_page_offset if column.has_dictionary_page else column.data_page_offset
    for i in range(start, start + column.total_compressed_size):
        whole[i] ^= 0x5A
    path = work / "corrupt.parquet"
    path.write_bytes(bytes(whole))
    documents, tally = read(path)
    # The footer says how many rows the file holds, so the lost ones are counted exactly.
    assert_cut(path, documents, tally, "corrupt_input", lost=len(TEXTS) - 20)
    assert len(documents) == 20


def test_symlinks_that_lead_nowhere_are_listed_and_counted(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    (inputs / "sub").mkdir(parents=True)
    (inputs / "a.jsonl").write_bytes(b"".join(LINES[:3]))
    (inputs / "sub" / "gone.jsonl").symlink_to(tmp_path / "missing.jsonl")
    (inputs / "loop1.jsonl").symlink_to(inputs / "loop2.jsonl")
    (inputs / "loop2.jsonl").symlink_to(inputs / "loop1.jsonl")
    want = [str(inputs / n) for n in ("a.jsonl", "loop1.jsonl", "loop2.jsonl", "sub/gone.jsonl")]
    assert [f.path for f in files.expand_inputs([f"{inputs}/**"])] == want
    assert [f.path for f in files.expand_inputs([f"{inputs}/"])] == want[:3]
    assert [f.path for f in files.expand_inputs([want[3]])] == want[3:]
    assert read(Path(want[0]))[1]["documents_read"] == 3
    for path, reason in zip(want[1:], ("symlink_loop", "symlink_loop", "dangling_symlink"), strict=True):
        documents, tally = read(Path(path))
        assert documents == [] and tally[reason] == 1 == tally["documents_in"] and tally["files_unreadable"] == 1
        assert tally["damaged_inputs"][0]["path"] == path
        with pytest.raises(BadInputError, match=f"{path}: {reason.replace('_', ' ')}"):
            read(Path(path), strict=True)


def test_committed_output_sheds_the_marker_and_temporaries_of_a_run_killed_after_commit(tmp_path: Path) -> None:
    identity = commit.JobIdentity(config={"job": "tokenize", "num_shards": 1}, inputs="abc")
    out = tmp_path / "out"
    (out / files.TEMP_DIR).mkdir(parents=True)
    (out / files.TEMP_DIR / "meta.json.0123").write_bytes(b"{}")
    (out / "train-00000-of-00001.bin").write_bytes(b"\0\0")
    (out / "meta.json").write_text(json.dumps({"config": identity.config, "inputs": identity.inputs}))
    (out / commit.MARKER).write_text(json.dumps({"fingerprint": identity.fingerprint}))
    assert commit.prepare_output(str(out), identity, overwrite=False)
    assert sorted(os.listdir(out)) == ["meta.json", "train-00000-of-00001.bin"]


def test_an_input_folder_is_named_as_given_never_as_a_pattern_made_of_it(tmp_path: Path) -> None:
    empty, full = tmp_path / "empty", tmp_path / "full"
    empty.mkdir()
    full.mkdir()
    (full / "a.jsonl").write_text('{"text": "a"}\n')
    for pattern in (str(empty), f"{empty}/", f"{empty}/**"):
        with pytest.raises(FileNotFoundError, match=rf"^--input '{empty}' is a folder that holds no file$"):
            files.expand_inputs([pattern])
    with pytest.raises(FileNotFoundError, match=rf"^--input '{full}' is a folder; name its files with a glob"):
        files.expand_inputs([str(full)])
    with pytest.raises(FileNotFoundError, match=rf"^--input '{tmp_path}/none-\*' matches no file$"):
        files.expand_inputs([f"{tmp_path}/none-*"])
    with pytest.raises(FileNotFoundError, match=rf"^--input '{tmp_path}/gone/' matches no file$"):
        files.expand_inputs([f"{tmp_path}/gone/"])
    assert [f.path for f in files.expand_inputs([f"{full}/"])] == [str(full / "a.jsonl")]

"""ReadDocuments and Tokenize as transforms on TestPipeline: the bad-input table, row keys, strict mode."""

from __future__ import annotations

import gzip
import json
from pathlib import Path

import apache_beam as beam
import numpy as np
import pytest
from apache_beam.testing.test_pipeline import TestPipeline
from apache_beam.testing.util import assert_that, equal_to

from dew.preprocess import document_rows
from dew.preprocess.read_documents import BadInputError, ReadDocuments, ReadOptions, merge_tallies
from dew.preprocess.tokenizing import Tokenize, describe_tokenizer

pytestmark = pytest.mark.beam
OPTIONS = ReadOptions(max_document_bytes=100)

# file name → (content, documents kept as {row: text}, drops by reason)
TABLE = {
    "good.jsonl": (b'{"text": "one"}\n{"text": "two"}\n', {0: "one", 1: "two"}, {}),
    "utf8.jsonl": (b'{"text": "\xff"}\n{"text": "ok"}\n', {1: "ok"}, {"invalid_utf8": 1}),
    "surrogate.jsonl": (b'{"text": "\\ud800"}\n', {}, {"invalid_utf8": 1}),
    "malformed.jsonl": (b'{"text": "x"\n[1, 2]\n', {}, {"malformed_json": 1, "missing_field": 1}),
    "missing.jsonl": (b'{"body": "x"}\n{"text": 5}\n{"text": null}\n', {}, {"missing_field": 3}),
    "empty.jsonl": (b'{"text": ""}\n\n{"text": "after"}\n', {2: "after"}, {"empty": 2}),
    "huge.jsonl": (b'{"text": "' + b"y" * 500 + b'"}\n{"text": "next"}\n', {1: "next"}, {"too_long": 1}),
    "huge.txt": (b"z" * 101, {}, {"too_long": 1}),
    "latin1.txt": (b"caf\xe9", {}, {"invalid_utf8": 1}),
    "fine.txt": ("naïve text".encode(), {0: "naïve text"}, {}),
    # A byte order mark, as Windows tools start an export, was the first line's: malformed_json, or text.
    "bom.jsonl": (b'\xef\xbb\xbf{"text": "first"}\n{"text": "second"}\n', {0: "first", 1: "second"}, {}),
    "bom.txt": (b"\xef\xbb\xbf" + "naïve text".encode(), {0: "naïve text"}, {}),
}


def make_inputs(directory: Path) -> list[str]:
    for name, (content, _, _) in TABLE.items():
        (directory / name).write_bytes(content)
    (directory / "broken.jsonl.gz").write_bytes(b"not gzip at all")
    rng = np.random.default_rng(0)  # incompressible text, so half the file holds many whole rows
    rows = (json.dumps({"text": rng.bytes(24).hex()}).encode() + b"\n" for _ in range(3000))
    truncated = gzip.compress(b"".join(rows))
    (directory / "truncated.jsonl.gz").write_bytes(truncated[: len(truncated) // 2])
    return sorted(str(p) for p in directory.iterdir())


def test_every_bad_input_is_counted_by_reason_and_rows_keep_their_numbers(tmp_path: Path) -> None:
    paths = make_inputs(tmp_path)
    index = {Path(p).name: i for i, p in enumerate(paths)}
    want_docs = [((index[name], row), text) for name, (_, kept, _) in TABLE.items() for row, text in kept.items()]
    drops: dict[str, int] = {}
    for _, _, dropped in TABLE.values():
        for reason, n in dropped.items():
            drops[reason] = drops.get(reason, 0) + n
    with TestPipeline(runner="BundleBasedDirectRunner") as p:
        read = p | beam.Create(list(enumerate(paths))) | ReadDocuments(OPTIONS)
        truncated = index["truncated.jsonl.gz"]
        kept = read.documents | "NotTruncated" >> beam.Filter(lambda kv: kv[0][0] != truncated)
        assert_that(kept, equal_to(want_docs), label="Documents")
        rows = (
            read.documents
            | "Truncated" >> beam.Filter(lambda kv: kv[0][0] == truncated)
            | beam.combiners.Count.Globally()
        )
        # A stream that breaks off keeps the rows before the break, and never invents one.
        assert_that(rows, lambda got: _check(0 < got[0] < 3000, f"{got} rows before the break"), label="Prefix")
        tallies = read.stats | beam.combiners.ToList() | beam.Map(merge_tallies)

        def check(got: list[dict[str, int]]) -> None:
            (tally,) = got
            damaged = {d["path"].rsplit("/", 1)[-1]: d["reason"] for d in tally["damaged_inputs"]}
            assert damaged == {"broken.jsonl.gz": "corrupt_input", "truncated.jsonl.gz": "truncated_input"}
            meta = ("documents_in", "documents_read", "damaged_inputs", "drop_examples")
            dropped = {k: v for k, v in tally.items() if k not in meta}
            want = {**drops, "corrupt_input": 1, "truncated_input": 1, "files_unreadable": 2}
            assert {k: v for k, v in dropped.items() if v} == want, dropped
            # One example a reason, the first in path order: where a reader of the failure starts looking.
            examples = tally["drop_examples"]
            assert set(examples) == set(want) - {"files_unreadable"}
            assert examples["truncated_input"]["path"].endswith("truncated.jsonl.gz")
            assert examples["truncated_input"]["row"] > 0
            assert examples["missing_field"] == {"path": str(tmp_path / "malformed.jsonl"), "row": 1}
            assert tally["documents_in"] == tally["documents_read"] + sum(want.values()) - 2

        assert_that(tallies, check, label="Tallies")


def _check(ok: bool, message: str) -> None:
    assert ok, message


@pytest.mark.parametrize(
    ("name", "message"),
    [
        ("malformed.jsonl", "row 0: malformed json"),
        ("huge.jsonl", "row 0: too long"),
        ("broken.jsonl.gz", "corrupt input after 0 rows"),
    ],
)
def test_strict_mode_fails_naming_file_row_and_reason(tmp_path: Path, name: str, message: str) -> None:
    paths = [p for p in make_inputs(tmp_path) if Path(p).name == name]
    with pytest.raises(Exception, match=f"{name}: {message}"), TestPipeline(runner="BundleBasedDirectRunner") as p:
        _ = p | beam.Create(list(enumerate(paths))) | ReadDocuments(ReadOptions(max_document_bytes=100, strict=True))
    assert issubclass(BadInputError, ValueError)


def test_tokenize_appends_eos_and_keeps_keys(tmp_path: Path) -> None:
    info = describe_tokenizer("byte", pack=True)
    texts = [((0, i), "ab" * i + "é") for i in range(1, 40)]
    want = [(key, [*text.encode(), 256]) for key, text in texts]
    with TestPipeline(runner="BundleBasedDirectRunner") as p:
        out = p | beam.Create(texts) | Tokenize(info, batch_size=7) | beam.MapTuple(lambda k, ids: (k, ids.tolist()))
        assert_that(out, equal_to(want))
    assert info.dtype == np.uint16 and (info.eos_id, info.vocab_size) == (256, 257)


def test_a_txt_line_keeps_every_character_but_its_line_break(tmp_path) -> None:
    """Line mode strips a line's break, "\\n" or "\\r\\n", and nothing of the document: rstrip("\\r\\n") also
    took a carriage return that was the line's own ("a\\r\\r\\n" read as "a"), and a line that held
    only one was dropped as empty."""
    path = tmp_path / "lines.txt"
    path.write_bytes(b"a\r\r\nplain\nwindows\r\n\r\r\n\nlast\r")
    with open(path, "rb") as raw:
        rows = list(document_rows.DocumentRows(str(path), document_rows.ReadOptions(txt_documents="line")).read(raw))
    assert [(row, text) for row, text, _ in rows] == [
        (0, "a\r"),
        (1, "plain"),
        (2, "windows"),
        (3, "\r"),
        (4, None),
        (5, "last"),
    ]
    assert rows[4][2] == "empty"

"""inspect on a cleaned documents directory: each duplicate example names the document it was removed for,
its source file and row, and the corpus holding it (the directory itself or an --against one)."""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from dew.pipelines import cli
from dew.pipelines.inspect_duplicates import _removed, excerpt
from dew.pipelines.inspect_html import page
from dew.pipelines.inspection import summarize
from dew.preprocess.cleaning.plan import CleanPlan
from dew.preprocess.document_rows import ReadOptions
from tests.preprocess.planted import exact_copy, near_copy, real_texts

pytestmark = pytest.mark.beam
LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1", "--no-quality"]


def _write(path: Path, texts: list[str]) -> None:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": text}) + "\n" for text in texts))


def _row(path: str, row: int) -> str:
    with open(path) as f:
        return json.loads(f.readlines()[row])["text"]


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> tuple[Path, Path, list[str]]:
    """An earlier corpus cleaned on its own, then a new file cleaned against it: row 2 of the new file
    copies a document of the earlier corpus exactly, row 3 nearly copies row 1 of its own file."""
    work = tmp_path_factory.mktemp("dups")
    texts = real_texts(10)
    near, _ = near_copy(texts[7], 0.9, random.Random(3))
    _write(work / "old" / "old.jsonl", texts[:6])
    _write(work / "new" / "new.jsonl", [texts[6], texts[7], exact_copy(texts[2]), near, texts[8]])
    old, new = work / "old-clean", work / "new-clean"
    assert cli.main(["clean", "--input", str(work / "old" / "*"), "--output", str(old), *LOCAL]) == 0
    flags = ["--against", str(old), "--num_shards", "2", *LOCAL]
    assert cli.main(["clean", "--input", str(work / "new" / "*"), "--output", str(new), *flags]) == 0
    return old, new, texts


def test_every_duplicate_example_names_the_kept_documents_file_row_and_corpus(cleaned, capsys) -> None:
    old, new, texts = cleaned
    examples = summarize(str(new)).stats["drop_examples"]
    assert {"exact_duplicate", "near_duplicate"} <= set(examples)
    for reason in ("exact_duplicate", "near_duplicate"):
        example = examples[reason]
        kept, removed = example["kept"], example["removed"]
        assert kept["id"] == example["duplicate_of"]
        # What inspect says is where the kept document came from: that file holds it at that row.
        assert kept["excerpt"] == excerpt(_row(kept["source"], kept["row"]))
        assert removed["excerpt"] == excerpt(_row(example["path"], example["row"]))
    exact, near = examples["exact_duplicate"], examples["near_duplicate"]
    assert (Path(exact["path"]).name, exact["row"]) == ("new.jsonl", 2)
    assert (Path(exact["kept"]["source"]).name, exact["kept"]["row"]) == ("old.jsonl", 2)
    assert exact["kept"]["corpus"] == str(old) and exact["kept"]["excerpt"] == excerpt(texts[2])
    assert Path(near["path"]).name == Path(near["kept"]["source"]).name == "new.jsonl"
    assert {near["row"], near["kept"]["row"]} == {1, 3} and near["kept"]["corpus"] == str(new)

    assert cli.main(["inspect", str(new)]) == 0
    out = capsys.readouterr().out
    assert f"kept {exact['duplicate_of']}: {exact['kept']['source']} row 2, in --against {old}" in out
    assert f"kept {near['duplicate_of']}: {near['kept']['source']} row {near['kept']['row']}, in this directory" in out
    assert repr(exact["removed"]["excerpt"]) in out and repr(exact["kept"]["excerpt"]) in out


def test_the_html_report_and_json_show_the_kept_document(cleaned) -> None:
    _, new, _ = cleaned
    summary = summarize(str(new))
    near = summary.stats["drop_examples"]["near_duplicate"]
    html = page(summary)
    assert f"{near['kept']['source']} row {near['kept']['row']}, in {new}" in html
    assert "class='pair'" in html
    found = json.loads(json.dumps(summary.to_json()))["stats"]["drop_examples"]["near_duplicate"]
    assert found["kept"]["row"] == near["kept"]["row"]


def test_an_against_corpus_moved_away_is_named_not_a_crash(cleaned, capsys) -> None:
    old, new, _ = cleaned
    moved = old.with_name("old-moved")
    shutil.move(old, moved)
    try:
        assert cli.main(["inspect", str(new)]) == 0
        out = capsys.readouterr().out
        exact = summarize(str(new)).stats["drop_examples"]["exact_duplicate"]
        assert exact["kept"] == {
            "id": exact["duplicate_of"],
            "corpus": str(old),
            "missing": f"{old} is not there: the corpus was moved or deleted after the clean",
        }
        assert f"kept {exact['duplicate_of']}: not found: {old} is not there" in out
        assert "in this directory" in out  # the near duplicate's, in the output itself, is still found
    finally:
        shutil.move(moved, old)


def test_an_against_corpus_rewritten_after_the_clean_is_not_read(cleaned, tmp_path: Path) -> None:
    old, new, _ = cleaned
    kept = tmp_path / "kept"
    shutil.move(old, kept)
    try:
        _write(tmp_path / "other" / "other.jsonl", real_texts(12)[9:])
        assert cli.main(["clean", "--input", str(tmp_path / "other" / "*"), "--output", str(old), *LOCAL]) == 0
        exact = summarize(str(new)).stats["drop_examples"]["exact_duplicate"]
        assert exact["kept"]["missing"].startswith(f"{old} was rewritten after the clean")
    finally:
        shutil.rmtree(old, ignore_errors=True)
        shutil.move(kept, old)


def test_the_removed_text_is_read_with_the_read_options_the_clean_recorded(tmp_path: Path) -> None:
    """inspect reads a source through the job's own reader, with meta.json's options: here another text
    field, a byte order mark and a line too long for max_document_bytes, which is a row of its own."""
    zstandard = pytest.importorskip("zstandard")

    options = ReadOptions(text_field="body", max_document_bytes=64, strict=True)
    config = CleanPlan(output=str(tmp_path / "out"), read=options).config()
    assert ReadOptions.recorded(config) == ReadOptions(text_field="body", max_document_bytes=64)
    lines = [{"body": "first"}, {"body": "x" * 100}, {"text": "not this", "body": "third\nrow"}]
    data = b"\xef\xbb\xbf" + "".join(json.dumps(line) + "\n" for line in lines).encode()
    source = tmp_path / "in.jsonl.zst"
    source.write_bytes(zstandard.ZstdCompressor().compress(data))
    assert _removed(str(source), 0, config) == {"excerpt": "first"}
    assert _removed(str(source), 2, config) == {"excerpt": "third row"}
    assert _removed(str(source), 1, config) == {"missing": f"{source} holds no text at row 1 (too long)"}
    assert _removed(str(source), 3, config) == {"missing": f"{source} ends before row 3"}


def test_a_relative_source_is_read_from_where_inspect_runs_and_else_says_where_to_run_it(
    tmp_path: Path, monkeypatch
) -> None:
    """Sources are recorded as clean was given them: a relative one names the directory it is missing from
    and the fix, and reads when inspect runs where clean did."""
    config = CleanPlan(output=str(tmp_path / "out"), read=ReadOptions()).config()
    (tmp_path / "data").mkdir()
    (tmp_path / "data" / "a.jsonl").write_text(json.dumps({"text": "hello there"}) + "\n")
    elsewhere = tmp_path / "elsewhere"
    elsewhere.mkdir()
    monkeypatch.chdir(elsewhere)
    assert _removed("data/a.jsonl", 0, config) == {
        "missing": f"data/a.jsonl is not there from {elsewhere}: clean recorded it as given, relative to where "
        "it ran; run inspect from there"
    }
    monkeypatch.chdir(tmp_path)
    assert _removed("data/a.jsonl", 0, config) == {"excerpt": "hello there"}


def test_a_removal_table_naming_an_against_corpus_is_read(cleaned, tmp_path: Path) -> None:
    """A duplicate kept in an --against corpus names that corpus in its table row: the table is the one
    clean wrote, and is read (stats.json asks for a second example, so every table is)."""
    _, new, _ = cleaned
    copy = tmp_path / "new-clean"
    shutil.copytree(new, copy)
    stats = json.loads((copy / "stats.json").read_text())
    stats["dropped"]["exact_duplicate"] += 1
    (copy / "stats.json").write_text(json.dumps(stats))
    summary = summarize(str(copy), removals=2).stats
    assert "removal_problems" not in summary
    assert [e["duplicate_in"] for e in summary["removal_examples"]["exact_duplicate"]] == [
        stats["drop_examples"]["exact_duplicate"]["duplicate_in"]
    ]


def test_a_source_in_a_dew_directory_killed_or_stripped_since_is_not_read(tmp_path: Path) -> None:
    """A removal's source may be a shard of a documents directory (clean --input DIR). When that directory
    has since lost its meta.json, or is a job's leftovers, its files are not data: the text is not shown."""
    from dew.data.committed import JOB_MARKER

    config = CleanPlan(output=str(tmp_path / "out"), read=ReadOptions()).config()
    killed = tmp_path / "killed"
    killed.mkdir()
    source = killed / "docs.jsonl"
    source.write_text(json.dumps({"text": "from a directory never committed"}) + "\n")
    assert _removed(str(source), 0, config) == {"excerpt": "from a directory never committed"}
    (killed / JOB_MARKER).write_text("{}")
    missing = _removed(str(source), 0, config)["missing"]
    assert str(killed) in missing and "commit" in missing, missing

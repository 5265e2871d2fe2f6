"""The clean job against hostile inputs and hostile --against corpora, and its provenance invariants.

Every removal must point to a document that was written, or that the --against corpus it names holds;
a committed directory read again (--against, or --input to clean or tokenize) is checked against its
meta.json, so a shard rewritten after its commit is refused by name, never read as the corpus.
"""

from __future__ import annotations

import json
import os
import re
import shutil
from pathlib import Path

import pytest

from dew.data import formats
from dew.pipelines import clean_job as job
from dew.pipelines import tokenize_job
from dew.pipelines.flags import UsageError
from dew.preprocess.cleaning.plan import document_id
from tests.preprocess.planted import exact_copy, near_copy, real_texts
from tests.preprocess.test_clean_job import IN_MEMORY, TWO_WORKERS, kept_records, listing, removals

pytestmark = pytest.mark.beam


def clean(inputs: list[str], output: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    argv = [arg for path in inputs for arg in ("--input", path)]
    return job.main([*argv, "--output", str(output), "--no-quality", *flags, *runner])


def write_jsonl(path: Path, texts: list[object]) -> Path:
    path.parent.mkdir(parents=True, exist_ok=True)
    path.write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    return path


def stats(directory: Path) -> dict:
    return json.loads((directory / "stats.json").read_text())


def assert_provenance(directory: Path, against: dict[str, Path] | None = None) -> None:
    """Every duplicate removed points to a document written here, or held by the --against corpus it names;
    the books balance; and no document is both written and removed."""
    written = {r["id"] for r in kept_records(directory)}
    held = {str(path): {r["id"] for r in kept_records(path)} for path in (against or {}).values()}
    rows = removals(directory)
    assert not written & {r["id"] for r in rows}
    for row in rows:
        if row["duplicate_of"] is None:
            continue
        where = row["duplicate_in"]
        assert row["duplicate_of"] in (written if where == "" else held[where]), row
    found = stats(directory)
    assert found["documents_in"] == found["documents_written"] + sum(found["dropped"].values())
    assert found["documents_written"] == len(written)
    assert sum(found["dropped"][r] for r in ("exact_duplicate", "near_duplicate")) == sum(
        r["duplicate_of"] is not None for r in rows
    )


@pytest.fixture(scope="module")
def texts() -> list[str]:
    return real_texts(24)


def test_wordless_documents_are_duplicates_only_of_the_same_text(texts: list[str], tmp_path: Path) -> None:
    # All of these normalize to "" and have no shingle; only the repeated "***" is a duplicate.
    wordless = ["***", "?! ...", "\U0001f600\U0001f389", "   \n\t ", "--- * ---", "***"]
    # And two that differ in their vowel signs alone (a boy, a girl reading), once exact duplicates.
    signs = ["लड़का किताब पढ़ रहा था", "लड़की किताब पढ़ रही थी"]
    source = write_jsonl(tmp_path / "in" / "a.jsonl", [*texts[:4], *wordless, *signs])
    out = tmp_path / "out"
    clean([str(source)], out)
    kept = {r["text"] for r in kept_records(out)}
    assert set(wordless) | set(signs) <= kept
    (gone,) = removals(out)
    assert gone["row"] in (4, 9) and gone["reason"] == "exact_duplicate"  # the one of the larger id goes
    assert gone["duplicate_of"] == document_id(str(source), 13 - gone["row"])
    assert_provenance(out)


def test_hostile_rows_are_counted_and_the_rest_deduplicated(texts: list[str], tmp_path: Path) -> None:
    pa = pytest.importorskip("pyarrow")
    pq = pytest.importorskip("pyarrow.parquet")
    import gzip

    inputs = tmp_path / "in"
    write_jsonl(inputs / "a.jsonl", [texts[0], "", 42, ["a", "list"], None, texts[1]])
    with open(inputs / "a.jsonl", "ab") as f:
        f.write(b'{"text": "caf\xe9"}\n{not json\n')
    crlf = "".join(json.dumps({"text": t.replace("\n", "\r\n")}) + "\r\n" for t in texts[2:4])
    (inputs / "crlf.jsonl").write_bytes(crlf.encode())
    whole = gzip.compress(("".join(json.dumps({"text": t}) + "\n" for t in texts[4:9])).encode())
    (inputs / "cut.jsonl.gz").write_bytes(whole[: len(whole) // 2])
    pq.write_table(pa.table({"text": [exact_copy(texts[2]), None, texts[9]]}), inputs / "p.parquet")
    out = tmp_path / "out"
    # The file named twice over, in other spellings: it is one file, read once.
    spellings = [str(inputs / "*"), str(inputs / "a.jsonl"), f"{inputs}/./a.jsonl", os.path.relpath(inputs / "a.jsonl")]
    clean(spellings, out)
    found = stats(out)
    dropped = found["dropped"]
    assert dropped["empty"] == 1 and dropped["missing_field"] == 4  # 42, a list, a null, the parquet null
    assert dropped["invalid_utf8"] == 1 and dropped["malformed_json"] == 1 and dropped["truncated_input"] == 1
    # The parquet copy of a CRLF document is its exact duplicate: "\r\n" is whitespace to normalization.
    assert dropped["exact_duplicate"] == 1 and dropped["near_duplicate"] == 0
    kept = kept_records(out)
    cut = sum(r["source"].endswith("cut.jsonl.gz") for r in kept)  # the rows before the cut
    assert cut >= 1
    assert found["documents_in"] == 8 + 2 + 3 + cut + 1  # a.jsonl's rows once, crlf's, parquet's, the cut's
    spelt = {(os.path.basename(r["source"]), r["source"]) for r in [*kept, *removals(out)]}
    assert sorted(name for name, _ in spelt) == ["a.jsonl", "crlf.jsonl", "cut.jsonl.gz", "p.parquet"]
    assert_provenance(out)


@pytest.fixture(scope="module")
def two_corpora(texts: list[str], tmp_path_factory: pytest.TempPathFactory) -> dict[str, Path]:
    """Two committed corpora that duplicate each other (one holds exact and near copies of the other's
    documents), and a new crawl with copies of both and of itself."""
    import random

    rng = random.Random(5)
    root = tmp_path_factory.mktemp("against")
    first = write_jsonl(root / "in-a" / "a.jsonl", texts[:10])
    near = [near_copy(t, 0.9, rng)[0] for t in texts[:4]]
    second = write_jsonl(root / "in-b" / "b.jsonl", [exact_copy(texts[5]), *near, *texts[10:16]])
    clean([str(first)], root / "A")
    clean([str(second)], root / "B")
    crawl = [texts[0], exact_copy(texts[12]), near[1], near_copy(texts[6], 0.9, rng)[0], *texts[16:22], texts[17]]
    write_jsonl(root / "in-c" / "c.jsonl", crawl)
    return {"A": root / "A", "B": root / "B", "crawl": root / "in-c" / "c.jsonl", "root": root}


def test_against_two_corpora_that_duplicate_each_other_points_into_the_one_named(two_corpora, tmp_path: Path) -> None:
    a, b = two_corpora["A"], two_corpora["B"]
    flags = ["--against", str(a), "--against", str(b), "--num_shards", "2"]
    out = tmp_path / "one"
    clean([str(two_corpora["crawl"])], out, *flags)
    assert_provenance(out, {"A": a, "B": b})
    rows = {r["row"]: r for r in removals(out)}
    (twin,) = set(rows) - {0, 1, 2, 3}  # rows 5 and 10 are one text: the one of the smaller id is kept
    assert set(rows) == {0, 1, 2, 3, twin} and twin in (5, 10)
    assert rows[twin]["duplicate_in"] == "" and rows[twin]["duplicate_of"] == document_id(
        str(two_corpora["crawl"]), 15 - twin
    )
    assert [rows[r]["duplicate_in"] for r in range(4)] == [str(a), str(b), str(a), str(a)]
    # Row 2 is a copy of B's near copy of A's document 1: the cluster spans both, and A's (given first) is kept.
    assert rows[2]["duplicate_of"] == kept_records(a)[1]["id"] and rows[2]["reason"] == "exact_duplicate"
    assert rows[3]["reason"] == "near_duplicate" and rows[3]["duplicate_of"] == kept_records(a)[6]["id"]
    # The same bytes on two workers, and after a crash in the middle of writing.
    clean([str(two_corpora["crawl"])], tmp_path / "two", *flags, runner=TWO_WORKERS)
    assert listing(tmp_path / "two") == listing(out)
    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00002.parquet"
    blocker.mkdir(parents=True)
    with pytest.raises(Exception, match="train-00001-of-00002"):
        clean([str(two_corpora["crawl"])], crashed, *flags)
    blocker.rmdir()
    assert clean([str(two_corpora["crawl"])], crashed, *flags).get("shards_skipped", 0) >= 1
    assert listing(crashed) == listing(out)


def test_against_the_output_of_the_same_inputs_removes_every_document_as_its_own_copy(
    two_corpora, tmp_path: Path
) -> None:
    a = two_corpora["A"]
    source = two_corpora["root"] / "in-a" / "a.jsonl"
    with pytest.raises(Exception, match=r"(?s)wrote none of 10 .*exact_duplicate: 10 .*are the inputs already in it"):
        clean([str(source)], tmp_path / "again", "--against", str(a))
    assert not (tmp_path / "again" / formats.META).exists()
    # With one new document beside them, the old ones all go, each pointing to itself in A.
    new = write_jsonl(tmp_path / "new" / "n.jsonl", ["A brand new document about nothing in particular. " * 8])
    out = tmp_path / "out"
    clean([str(source), str(new)], out, "--against", str(a), "--max_drop_fraction", "1")
    assert_provenance(out, {"A": a})
    assert {(r["id"], r["duplicate_of"], r["duplicate_in"]) for r in removals(out)} == {
        (r["id"], r["id"], str(a)) for r in kept_records(a)
    }


def test_a_committed_corpus_altered_after_its_commit_is_refused_naming_the_shard(two_corpora, tmp_path: Path) -> None:
    altered = tmp_path / "A"
    shutil.copytree(two_corpora["A"], altered)
    (shard,) = formats.read_meta(str(altered)).shards("train")
    path = altered / shard.name
    data = bytearray(path.read_bytes())
    data[len(data) // 2] ^= 1  # the same size: only its checksum can tell
    path.write_bytes(bytes(data))
    crawl = str(two_corpora["crawl"])
    for run in (
        lambda: clean([crawl], tmp_path / "c1", "--against", str(altered)),
        lambda: clean([str(altered)], tmp_path / "c2"),
        lambda: tokenize_job.main(["--input", str(altered), "--output", str(tmp_path / "t"), *IN_MEMORY]),
    ):
        with pytest.raises(Exception, match=f"{re.escape(str(path))} fails its .* check against meta.json"):
            run()
    assert not any((tmp_path / name / formats.META).exists() for name in ("c1", "c2", "t"))
    # Its shard named as a file is its shard still, and checked; its removal table is no documents file.
    with pytest.raises(Exception, match=f"{re.escape(str(path))} fails its"):
        clean([str(path)], tmp_path / "c3")
    with pytest.raises(UsageError, match="is a removal table of a documents directory"):
        clean([str(two_corpora["A"] / "*.parquet")], tmp_path / "c4")
    # Not a committed documents directory: refused by name before anything runs.
    (tmp_path / "bare").mkdir()
    shutil.copy(path, tmp_path / "bare" / shard.name)
    for against, why in ((tmp_path / "bare", "no meta.json"), (two_corpora["crawl"], "is a file: --against takes")):
        with pytest.raises(Exception, match=why):  # UncommittedError, UsageError: each a user error
            clean([crawl], tmp_path / "c5", "--against", str(against))
    # The untouched corpus still reads, as an input as well as --against.
    clean([str(two_corpora["A"])], tmp_path / "ok", "--against", str(two_corpora["B"]))
    assert_provenance(tmp_path / "ok", {"B": two_corpora["B"]})


@pytest.mark.parametrize("delta", [1, -1])
def test_a_corpus_whose_meta_json_was_recounted_is_refused_naming_the_shard(two_corpora, delta, tmp_path: Path) -> None:
    """meta.json rewritten, checksum and all, with one record more or fewer than its shard's parquet footer
    counts: each job read the shard by its checksum alone and committed over it, where the runtime refuses."""
    from tests.runtime.test_committed import rewrite_records

    recounted = tmp_path / "A"
    shutil.copytree(two_corpora["A"], recounted)
    path = recounted / rewrite_records(recounted, "train", 0, delta)
    crawl = str(two_corpora["crawl"])
    said = rf"{re.escape(str(path))} holds \d+ records by its own footer, but meta.json records"
    for run in (
        lambda: clean([crawl], tmp_path / "c1", "--against", str(recounted)),
        lambda: clean([str(recounted)], tmp_path / "c2"),
        lambda: tokenize_job.main(["--input", str(recounted), "--output", str(tmp_path / "t"), *IN_MEMORY]),
    ):
        with pytest.raises(Exception, match=said):
            run()
    assert not any((tmp_path / name / formats.META).exists() for name in ("c1", "c2", "t"))


@pytest.mark.parametrize("state", ["killed", "lost"])
def test_the_shards_of_an_uncommitted_directory_named_by_a_glob_are_refused(two_corpora, state, tmp_path: Path) -> None:
    """A folder given as --input is refused uncommitted, but its shards named by a glob were read as plain
    parquet files: a killed clean's shards, or a corpus that lost its meta.json, tokenized unchecked."""
    from dew.data import committed

    uncommitted = tmp_path / "A"
    shutil.copytree(two_corpora["A"], uncommitted)
    (uncommitted / formats.META).unlink()
    if state == "killed":
        (uncommitted / committed.JOB_MARKER).write_text(json.dumps({"config": {"job": "clean"}}))
        (uncommitted / committed.TEMP_DIR).mkdir()
    said = "never committed" if state == "killed" else r"holds dew shards \(train-00000-of-00001.parquet"
    shards = str(uncommitted / "train-?????-of-?????.parquet")
    for run in (
        lambda: clean([shards], tmp_path / "c"),
        lambda: tokenize_job.main(["--input", shards, "--output", str(tmp_path / "t"), *IN_MEMORY]),
    ):
        with pytest.raises(committed.UncommittedError, match=said):
            run()
    assert not any((tmp_path / name / formats.META).exists() for name in ("c", "t"))


def test_a_shard_named_file_its_meta_json_does_not_list_is_refused(two_corpora, tmp_path: Path) -> None:
    """A commit deletes every shard its meta.json does not list, so one beside them was put there by hand;
    named by a glob with the listed ones, it was read as documents, unchecked."""
    extended = tmp_path / "A"
    shutil.copytree(two_corpora["A"], extended)
    (shard,) = formats.read_meta(str(extended)).shards("train")
    extra = extended / "train-00001-of-00002.parquet"
    shutil.copy(extended / shard.name, extra)
    for run in (
        lambda: clean([str(extended / "train-?????-of-?????.parquet")], tmp_path / "c"),
        lambda: tokenize_job.main(["--input", str(extra), "--output", str(tmp_path / "t"), *IN_MEMORY]),
    ):
        with pytest.raises(UsageError, match=rf"{re.escape(str(extra))} is named as a shard, but .* lists no such"):
            run()

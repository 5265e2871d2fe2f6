"""The clean job end to end on DirectRunner, on real text with planted duplicates of known similarity."""

from __future__ import annotations

import contextlib
import json
import shutil
from pathlib import Path

import numpy as np
import pytest

from dew.data import formats
from dew.pipelines import clean_job as job
from dew.pipelines import cli, tokenize_job
from dew.pipelines.inspect_duplicates import excerpt
from dew.pipelines.inspection import summarize
from dew.preprocess.cleaning import plan
from dew.preprocess.cleaning.against import read_columns
from dew.preprocess.cleaning.plan import document_id
from dew.preprocess.cleaning.removals import read_table
from dew.preprocess.commit import OutputConflictError
from dew.preprocess.read_documents import BadInputError
from tests.preprocess.planted import Planted, planted_corpus, write_files

pytestmark = pytest.mark.beam
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
TWO_WORKERS = ["--direct_running_mode=multi_processing", "--direct_num_workers=2"]


def clean(inputs: Path, output: Path, *flags: str, runner: list[str] = IN_MEMORY) -> dict:
    """The job on `inputs`, deduplicating only: the quality filters have a test of their own."""
    return job.main(["--input", str(inputs / "*"), "--output", str(output), "--no-quality", *flags, *runner])


def listing(directory: Path) -> dict[str, str]:
    return {p.name: formats.sha256_file(str(p)) for p in sorted(directory.iterdir()) if p.is_file()}


def kept_records(directory: Path) -> list[dict[str, str]]:
    meta = formats.read_meta(str(directory), kind="documents")
    rows = []
    for shard in meta.shards("train"):
        for values in read_columns(str(directory / shard.name), ["id", "text", "source", "row"]):
            rows.append(dict(zip(("id", "text", "source", "row"), (v.decode() for v in values), strict=True)))
    return rows


def removals(directory: Path) -> list[dict]:
    return [row for table in sorted(directory.glob("*.removals.parquet")) for row in read_table(str(table))]


@pytest.fixture(scope="module")
def planted(tmp_path_factory: pytest.TempPathFactory) -> tuple[Planted, Path, dict[tuple[str, int], int]]:
    corpus = planted_corpus()
    inputs = tmp_path_factory.mktemp("planted") / "in"
    return corpus, inputs, write_files(corpus, inputs)


@pytest.fixture(scope="module")
def cleaned(planted, tmp_path_factory: pytest.TempPathFactory) -> Path:
    _, inputs, _ = planted
    output = tmp_path_factory.mktemp("cleaned") / "out"
    clean(inputs, output, "--num_shards", "3")
    return output


def test_kept_documents_are_what_their_sources_held_and_the_books_balance(planted, cleaned: Path) -> None:
    corpus, inputs, place = planted
    kept = kept_records(cleaned)
    for record in kept:
        source, row = record["source"], int(record["row"])
        assert record["id"] == document_id(source, row)
        assert record["text"] == corpus.texts[place[(Path(source).name, row)]]
    removed = removals(cleaned)
    ids = [r["id"] for r in kept] + [r["id"] for r in removed]
    every = {document_id(str(inputs / name), row) for name, row in place}
    assert sorted(ids) == sorted(every)  # each document once, written or removed
    stats = json.loads((cleaned / "stats.json").read_text())
    assert stats["documents_in"] == len(place) == stats["documents_written"] + sum(stats["dropped"].values())
    assert stats["dropped"]["exact_duplicate"] == sum(r["reason"] == "exact_duplicate" for r in removed)
    assert sum(stats["removal_tables"].values()) == len(removed)


def test_planted_duplicates_are_found_and_unique_documents_kept(planted, cleaned: Path) -> None:
    corpus, inputs, place = planted
    id_of = {i: document_id(str(inputs / name), row) for (name, row), i in place.items()}
    kept = {r["id"] for r in kept_records(cleaned)}
    removed = {r["id"]: r for r in removals(cleaned)}
    family_of = {id_of[i]: f for f, family in enumerate(corpus.families) for i in family}
    for f, family in enumerate(corpus.families):
        members = [id_of[i] for i in family]
        if corpus.kinds[f] == "unique":
            assert members[0] in kept, "a unique document was removed"
        if corpus.kinds[f] == "exact":
            assert sum(m in kept for m in members) == 1, "every exact copy is removed"
            (gone,) = [m for m in members if m not in kept]
            assert removed[gone]["reason"] == "exact_duplicate"
    # Every removal points to a kept document of its own family (the cluster planted).
    for doc_id, row in removed.items():
        assert row["duplicate_of"] in kept and row["duplicate_in"] == ""
        assert family_of[row["duplicate_of"]] == family_of[doc_id]

    # Recall over planted pairs at Jaccard >= 0.85: the two end in one cluster, kept as one document.
    def kept_as(i: int) -> str:
        return id_of[i] if id_of[i] in kept else removed[id_of[i]]["duplicate_of"]

    pairs = [(family[0], family[1]) for family in corpus.families if len(family) > 1]
    similar = [(a, b) for a, b in pairs if corpus.similarity.get(b, 1.0) >= 0.85]
    found = [(a, b) for a, b in similar if kept_as(a) == kept_as(b)]
    assert len(similar) >= 100
    assert len(found) / len(similar) >= 0.95
    # Chains: the copy of a copy joins the same cluster, so the family keeps one document.
    chains = [f for f, kind in enumerate(corpus.kinds) if kind == "chain"]
    assert sum(sum(id_of[i] in kept for i in corpus.families[f]) == 1 for f in chains) >= 0.9 * len(chains)


def test_two_workers_write_the_same_bytes(planted, cleaned: Path, tmp_path: Path) -> None:
    _, inputs, _ = planted
    clean(inputs, tmp_path / "two", "--num_shards", "3", runner=TWO_WORKERS)
    assert listing(tmp_path / "two") == listing(cleaned)


def test_inspect_shows_removal_reasons_with_examples(
    planted, cleaned: Path, capsys: pytest.CaptureFixture[str]
) -> None:
    corpus, _, place = planted
    summary = summarize(str(cleaned))
    family_of = {i: f for f, family in enumerate(corpus.families) for i in family}
    for reason in ("exact_duplicate", "near_duplicate"):  # each names the document of its family it was kept for
        example = summary.stats["drop_examples"][reason]
        kept = example["kept"]
        removed_at, kept_at = (
            place[(Path(example["path"]).name, example["row"])],
            place[(Path(kept["source"]).name, kept["row"])],
        )
        assert family_of[removed_at] == family_of[kept_at] and removed_at != kept_at
        assert kept["corpus"] == str(cleaned) and kept["excerpt"] == excerpt(corpus.texts[kept_at])
    assert summary.kind == "documents" and summary.stats["dropped"]["near_duplicate"] > 0
    assert cli.main(["inspect", str(cleaned)]) == 0
    out = capsys.readouterr().out
    example = summary.stats["drop_examples"]["exact_duplicate"]
    assert f"dropped exact_duplicate: {summary.stats['dropped']['exact_duplicate']:,}" in out
    assert f"row {example['row']}, a duplicate of {example['duplicate_of']}" in out


def test_crash_then_rerun_ends_identical(planted, cleaned: Path, tmp_path: Path) -> None:
    _, inputs, _ = planted
    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00003.parquet"
    blocker.mkdir(parents=True)  # a directory where a shard must go: writing that shard fails for real
    with pytest.raises(Exception, match="train-00001-of-00003"):
        clean(inputs, crashed, "--num_shards", "3")
    with pytest.raises(FileNotFoundError, match="never committed"):
        formats.read_meta(str(crashed))
    with pytest.raises(FileNotFoundError, match="never committed"):  # and so does tokenize
        tokenize_job.main(["--input", str(crashed), "--output", str(tmp_path / "tok"), *IN_MEMORY])
    blocker.rmdir()
    found = clean(inputs, crashed, "--num_shards", "3")
    assert found.get("shards_skipped", 0) >= 1
    assert listing(crashed) == listing(cleaned)


def test_a_run_resumed_under_other_rules_refuses_the_old_rules_shards(
    planted, tmp_path: Path, monkeypatch: pytest.MonkeyPatch
) -> None:
    """A crash, then an upgrade of dew that decides documents differently (RULES_VERSION raised), then the
    rerun: the shards the old rules committed are refused, never kept beside the new rules' ones."""
    _, inputs, _ = planted
    crashed = tmp_path / "crashed"
    blocker = crashed / "train-00001-of-00003.parquet"
    blocker.mkdir(parents=True)
    monkeypatch.setattr(plan, "RULES_VERSION", plan.RULES_VERSION - 1)  # the dew before the upgrade
    with pytest.raises(Exception, match="train-00001-of-00003"):
        clean(inputs, crashed, "--num_shards", "3")
    assert (crashed / "train-00000-of-00003.parquet").exists()  # a shard the old rules committed
    blocker.rmdir()
    monkeypatch.undo()
    with pytest.raises(OutputConflictError, match=r"another config.*rules"):
        clean(inputs, crashed, "--num_shards", "3")


def test_against_removes_duplicates_of_a_committed_corpus_naming_it(cleaned: Path, tmp_path: Path) -> None:
    kept = kept_records(cleaned)
    new = [kept[0]["text"], kept[1]["text"].upper(), "A brand new document " * 20]
    fresh = tmp_path / "fresh"
    fresh.mkdir()
    (fresh / "new.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in new))
    out = tmp_path / "out"
    clean(fresh, out, "--against", str(cleaned))
    removed = {r["source"].rsplit("/", 1)[-1] + f":{r['row']}": r for r in removals(out)}
    assert set(removed) == {"new.jsonl:0", "new.jsonl:1"}
    assert removed["new.jsonl:0"]["duplicate_of"] == kept[0]["id"]
    assert removed["new.jsonl:1"]["duplicate_of"] == kept[1]["id"]
    assert {r["duplicate_in"] for r in removed.values()} == {str(cleaned)}
    assert [r["text"] for r in kept_records(out)] == [new[2]]


def test_tokenize_reads_a_committed_documents_directory(cleaned: Path, tmp_path: Path) -> None:
    from dew.data.text import ByteTokenizer
    from dew.preprocess.pack import shard_tokens

    tokenize_job.main(["--input", str(cleaned), "--output", str(tmp_path / "tok"), "--pack", *IN_MEMORY])
    meta = formats.read_meta(str(tmp_path / "tok"), kind="tokens")
    pieces = [p for s in meta.shards("train") for p in shard_tokens(str(tmp_path / "tok" / s.name), "bin", "uint16")]
    tokens = np.concatenate(pieces).tolist()
    eos = meta.tokens.eos_id
    texts = [r["text"] for r in kept_records(cleaned)]
    expected = [i for text in texts for i in [*ByteTokenizer().encode(text), eos]]
    assert tokens == expected


def test_strict_fails_on_the_first_bad_row_naming_it(tmp_path: Path) -> None:
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text(json.dumps({"text": "fine " * 30}) + "\n{not json\n")
    with pytest.raises(BadInputError, match=r"a.jsonl: row 1: malformed json"):
        clean(inputs, tmp_path / "out", "--strict")
    shutil.rmtree(tmp_path / "out", ignore_errors=True)
    clean(inputs, tmp_path / "out")
    assert json.loads((tmp_path / "out" / "stats.json").read_text())["dropped"]["malformed_json"] == 1


def test_quality_filters_remove_each_document_by_its_first_failing_rule(tmp_path: Path) -> None:
    quality = pytest.importorskip("dew.preprocess.cleaning.quality", reason="the quality filters module is absent")
    from tests.preprocess.planted import real_texts

    config = quality.QualityConfig()
    prose = "The cat sat on the mat and looked at the birds that flew over the house. " * 3
    texts = [*real_texts(30), "too short", "lorem ipsum dolor sit amet. " * 20, prose.strip()]
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    out = tmp_path / "out"
    job.main(["--input", str(inputs / "a.jsonl"), "--output", str(out), "--max_drop_fraction", "1", *IN_MEMORY])
    expected = {row: quality.first_failure(text, config) for row, text in enumerate(texts)}
    assert any(expected.values()) and not all(expected.values())
    removed = {r["row"]: r for r in removals(out)}
    kept = {int(r["row"]) for r in kept_records(out)}
    for row, reason in expected.items():
        if reason is None:
            assert row in kept
        else:
            assert removed[row]["reason"] == reason and removed[row]["duplicate_of"] is None
    stats = json.loads((out / "stats.json").read_text())
    assert set(quality.QUALITY_REASONS) <= set(stats["dropped"])
    for reason in set(expected.values()) - {None}:
        assert stats["dropped"][reason] == sum(r == reason for r in expected.values())
    # The thresholds are flags: with every family off, nothing is removed for quality.
    off = ["--no-gopher_repetition", "--no-gopher_quality", "--no-c4", "--no-fineweb"]
    job.main(["--input", str(inputs / "a.jsonl"), "--output", str(tmp_path / "off"), *off, *IN_MEMORY])
    assert not removals(tmp_path / "off")


def _c4_planted() -> tuple[list[bytes], dict[int, str]]:
    """jsonl lines: documents with lines C4 drops (no terminal punctuation, javascript, too short) among
    documents it keeps whole and hostile rows; and the text each readable row holds, by row."""
    from dew.preprocess.cleaning.quality import QualityConfig, filter_text
    from tests.preprocess.quality_corpus import prose, real_texts

    config = QualityConfig()
    edited, whole = [], []
    for text in prose(real_texts())[:300]:
        kept, reason = filter_text(text, config)
        if reason is None and kept != text:
            edited.append(text)  # pydoc wraps lines mid-sentence: C4 drops the wrapped ones
            if filter_text(kept, config) == (kept, None):
                whole.append(kept)  # one sentence a line: C4 keeps every line, and nothing else edits it
    assert len(whole) >= 11 and len(edited) >= 8
    planted = ["click here to subscribe", "Please enable JavaScript to view this page.", "Read more."]
    texts: list[str] = []
    for i, text in enumerate(whole[:8]):
        lines = text.split("\n")
        lines.insert(i % len(lines), planted[i % 3])
        texts += ["\n".join(lines)] + ([text] if i % 2 else [])  # with its edited copy: one exact duplicate
    lorem = "Lorem ipsum dolor sit amet, consectetur adipiscing elit."
    # whole[10] alone, C4 keeps whole: an unedited kept document whatever copy of each pair above is kept
    # (which one is, the ids decide, and they hash the input's path: the test's temporary directory).
    texts += [*edited[:8], f"{whole[9]}\n{lorem}", whole[8] + "\n{ not prose }.", whole[10]]
    rows = [json.dumps({"text": t}).encode() for t in texts]
    hostile = [b"{not json", b'{"body": "no text field"}', b'{"text": ""}', b'{"text": "caf\xe9 au lait"}']
    for at, row in zip((1, 5, 9, 13), hostile, strict=True):
        rows.insert(at, row)
    sources = {}
    for row, line in enumerate(rows):
        with contextlib.suppress(ValueError, KeyError):  # the hostile rows hold no text
            sources[row] = json.loads(line)["text"]
    return rows, sources


def test_c4_line_removal_rewrites_the_kept_text_and_dedup_hashes_that_text(tmp_path: Path) -> None:
    from dew.preprocess.cleaning.quality import QualityConfig, filter_text

    rows, sources = _c4_planted()
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_bytes(b"\n".join(rows) + b"\n")
    flags = ["--input", str(inputs / "a.jsonl"), "--num_shards", "2", "--max_drop_fraction", "1"]
    job.main([*flags, "--output", str(tmp_path / "one"), *IN_MEMORY])
    out = tmp_path / "one"
    config = QualityConfig()
    kept = kept_records(out)
    edits = 0
    for record in kept:
        source = sources[int(record["row"])]
        assert record["text"] == filter_text(source, config)[0]
        if record["text"] != source:
            edits += 1
            assert set(record["text"].split("\n")) < {line.strip() for line in source.splitlines()}
        else:
            assert record["text"].encode() == source.encode()  # unedited: the bytes read
    assert edits >= 8 and len(kept) - edits >= 1
    removed = removals(out)
    by_id = {r["id"]: r for r in kept}
    assert {r["reason"] for r in removed} >= {"exact_duplicate", "c4_lorem_ipsum", "c4_curly_bracket"}
    for r in removed:
        if r["duplicate_of"] is not None:  # the copy that C4's edit made equal to a kept document
            assert r["reason"] == "exact_duplicate" and r["duplicate_of"] in by_id
            original = by_id[r["duplicate_of"]]["text"]
            assert filter_text(sources[r["row"]], config)[0] == original
    assert sum(r["reason"] == "exact_duplicate" for r in removed) == 4
    stats = json.loads((out / "stats.json").read_text())
    assert stats["documents_in"] == len(rows) == stats["documents_written"] + sum(stats["dropped"].values())
    assert stats["documents_edited"] == edits
    assert stats["dropped"]["invalid_utf8"] == stats["dropped"]["malformed_json"] == 1
    job.main([*flags, "--output", str(tmp_path / "two"), *TWO_WORKERS])
    assert listing(tmp_path / "two") == listing(out)


def test_a_document_c4_leaves_no_line_of_is_removed_not_written_blank(tmp_path: Path) -> None:
    pytest.importorskip("dew.preprocess.cleaning.quality", reason="the quality filters module is absent")
    from tests.preprocess.planted import real_texts

    # No line ends a sentence: C4 drops each, and with its sentence count off and no FineWeb after it,
    # nothing else would stop an empty text.
    headings = "Installing the package\nRunning the tests\nSee also the reference pages"
    texts = [*real_texts(4), headings, "one line without a stop"]
    inputs = tmp_path / "in"
    inputs.mkdir()
    (inputs / "a.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in texts))
    flags = ["--c4_min_num_sentences", "-1", "--no-fineweb", "--no-gopher_repetition", "--no-gopher_quality"]
    out = tmp_path / "out"
    job.main(["--input", str(inputs / "a.jsonl"), "--output", str(out), "--no-near", *flags, *IN_MEMORY])
    kept = kept_records(out)
    assert kept and all(record["text"].strip() for record in kept)
    assert {r["row"]: r["reason"] for r in removals(out) if r["reason"] == "c4_empty"} == {4: "c4_empty", 5: "c4_empty"}
    stats = json.loads((out / "stats.json").read_text())
    assert stats["dropped"]["c4_empty"] == 2
    assert stats["documents_in"] == len(texts) == stats["documents_written"] + sum(stats["dropped"].values())

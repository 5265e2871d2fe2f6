"""inspect explains several removed documents a reason, read from the removal tables and checked there.

Each example must be a removal the job really made (a row of its removal table), its text the one its
source holds at its row, and a duplicate's kept document the one the table names. A removal table that
is not the one the job wrote (cut, deleted, another shard's) is named and its rows are not shown.
"""

from __future__ import annotations

import json
import random
import shutil
from pathlib import Path

import pytest

from dew.pipelines import cli
from dew.pipelines.inspect_duplicates import excerpt
from dew.pipelines.inspect_html import page
from dew.pipelines.inspection import summarize
from dew.preprocess.cleaning.quality import QualityConfig, first_failure
from dew.preprocess.cleaning.removals import read_table, table_bytes
from tests.preprocess.planted import near_copy, real_texts

pytestmark = pytest.mark.beam
# C4 off: its line removal edits a docstring's lines but not near_copy's one line, so the two would part.
LOCAL = ["--direct_running_mode=in_memory", "--direct_num_workers=1", "--c4", "false"]
SHARDS = 3
QUALITY = QualityConfig(c4=False)


def _rows(path: Path) -> list[str]:
    return [json.loads(line)["text"] for line in path.read_text().splitlines()]


def _table_rows(directory: Path) -> dict[str, dict]:
    return {row["id"]: row for table in sorted(directory.glob("*.removals.parquet")) for row in read_table(str(table))}


@pytest.fixture(scope="module")
def cleaned(tmp_path_factory: pytest.TempPathFactory) -> Path:
    """Real documents the quality filters keep with 6 exact copies and 5 near copies of them, beside
    real documents they remove (several reasons), in two files, cleaned into SHARDS shards."""
    work = tmp_path_factory.mktemp("removals")
    rng = random.Random(5)
    candidates = real_texts(200)
    passing = [text for text in candidates if first_failure(text, QUALITY) is None]
    texts = passing + [text for text in candidates if text not in passing][:20]
    planted = passing[:6]  # verbatim: exact_copy's case change would fail the stop-word rule
    nears = (near_copy(text, 0.9, rng)[0] for text in passing[6:])
    planted += [near for near in nears if first_failure(near, QUALITY) is None][:5]
    everything = texts + planted
    rng.shuffle(everything)
    (work / "in").mkdir()
    for part in range(2):
        lines = everything[part::2]
        (work / "in" / f"part-{part}.jsonl").write_text("".join(json.dumps({"text": t}) + "\n" for t in lines))
    out = work / "clean"
    assert (
        cli.main(
            ["clean", "--input", str(work / "in" / "*"), "--output", str(out), "--num_shards", str(SHARDS), *LOCAL]
        )
        == 0
    )
    return out


def test_each_reason_shows_up_to_the_asked_number_of_real_removals(cleaned: Path, capsys) -> None:
    stats = json.loads((cleaned / "stats.json").read_text())
    tables = _table_rows(cleaned)
    summary = summarize(str(cleaned), removals=3)
    shown = summary.stats["removal_examples"]
    removal_reasons = {r for r, n in stats["dropped"].items() if n and "id" in stats["drop_examples"].get(r, {})}
    assert {"exact_duplicate", "near_duplicate"} <= removal_reasons and len(removal_reasons) >= 3
    assert set(shown) == removal_reasons
    assert "removal_problems" not in summary.stats and "removal_tables" not in summary.stats
    for reason, examples in shown.items():
        assert len(examples) == min(3, stats["dropped"][reason])
        assert len({e["id"] for e in examples}) == len(examples)
        # The first is stats.json's own example (the first in source order), the others rows of the tables.
        assert {k: examples[0][k] for k in stats["drop_examples"][reason]} == stats["drop_examples"][reason]
        assert summary.stats["drop_examples"][reason] == examples[0]
        for example in examples:
            row = tables[example["id"]]
            assert (row["reason"], row["source"], row["row"]) == (reason, example["path"], example["row"])
            assert example["removed"]["excerpt"] == excerpt(_rows(Path(example["path"]))[example["row"]])
            if reason.endswith("_duplicate"):
                kept = example["kept"]
                assert kept["id"] == row["duplicate_of"] == example["duplicate_of"] and kept["corpus"] == str(cleaned)
                assert kept["excerpt"] == excerpt(_rows(Path(kept["source"]))[kept["row"]])
                assert kept["id"] not in tables  # the kept document was kept
            else:
                assert "kept" not in example

    assert cli.main(["inspect", str(cleaned), "--removals", "3"]) == 0
    out = capsys.readouterr().out
    for reason, examples in shown.items():
        for example in examples[1:]:
            of = f", a duplicate of {example['duplicate_of']}" if reason.endswith("_duplicate") else ""
            assert f"      and {example['path']} row {example['row']}{of}:" in out
        for example in examples:
            assert repr(example["removed"]["excerpt"]) in out
    html = page(summary)
    assert html.count("class='removal'") == sum(map(len, shown.values()))


def test_one_a_reason_reads_no_table(cleaned: Path, monkeypatch) -> None:
    from dew.pipelines import inspect_removals

    monkeypatch.setattr(inspect_removals, "read_table", lambda path: pytest.fail(f"read {path}"))
    shown = summarize(str(cleaned), removals=1).stats["removal_examples"]
    assert all(len(examples) == 1 for examples in shown.values())


DAMAGES = [
    "cut",
    "deleted",
    "other_shard",
    "not_parquet",
    "rows_moved",
    "sources_swapped",
    "row_as_text",
    "null_row",
    "kept_elsewhere",
]


@pytest.mark.parametrize("damage", DAMAGES)
def test_a_removal_table_changed_after_the_clean_is_named_not_shown(cleaned: Path, tmp_path: Path, damage: str) -> None:
    import pyarrow as pa
    import pyarrow.parquet as pq

    copy = tmp_path / "clean"
    shutil.copytree(cleaned, copy)
    tables = sorted(copy.glob("*.removals.parquet"))
    # The table of the most removals, or of the most duplicates where only a duplicate's row is changed.
    duplicates = damage == "kept_elsewhere"
    victim = max(tables, key=lambda t: sum(not duplicates or r["duplicate_of"] is not None for r in read_table(str(t))))
    rows = read_table(str(victim))
    keyed = [tuple(row.values()) for row in rows]
    sources = sorted({row["source"] for row in _table_rows(copy).values()})
    if damage == "cut":
        victim.write_bytes(table_bytes(keyed[:-1]))
    elif damage == "deleted":
        victim.unlink()
    elif damage == "other_shard":  # the right number of rows, but another table's
        other = next(t for t in tables if t != victim and read_table(str(t)))
        others = [tuple(row.values()) for row in read_table(str(other))]
        victim.write_bytes(table_bytes((others * len(keyed))[: len(keyed)]))
    elif damage == "rows_moved":  # every id and count kept, each row pointing at the next document
        victim.write_bytes(table_bytes([(*row[:5], row[5] + 1) for row in keyed]))
    elif damage == "sources_swapped":  # the other input file at the same row
        swapped = [(*row[:4], sources[1 - sources.index(row[4])], row[5]) for row in keyed]
        victim.write_bytes(table_bytes(swapped))
    elif damage == "kept_elsewhere":  # a duplicate said to be kept in a corpus it was not cleaned against
        elsewhere = str(tmp_path / "elsewhere")
        victim.write_bytes(table_bytes([(*row[:3], elsewhere if row[2] else None, *row[4:]) for row in keyed]))
    elif damage in ("row_as_text", "null_row"):  # a table written by another tool: a column of another type
        column = [str(row["row"]) for row in rows] if damage == "row_as_text" else [None] * len(rows)
        table = pa.Table.from_pylist(rows).set_column(5, "row", pa.array(column, pa.string()))
        pq.write_table(table, victim)
    else:
        victim.write_bytes(b"PAR1 not a table")
    stats = summarize(str(copy), removals=50).stats
    assert [p for p in stats["removal_problems"] if p.startswith(str(victim))], stats["removal_problems"]
    assert len(stats["removal_problems"]) == 1
    victims = {row["id"] for row in rows}
    firsts = {e["id"] for e in json.loads((copy / "stats.json").read_text())["drop_examples"].values() if "id" in e}
    shown = {e["id"] for examples in stats["removal_examples"].values() for e in examples}
    assert not (shown - firsts) & victims  # none of its rows shown, but stats.json's own examples
    assert shown - firsts  # the other tables' rows still are


def test_a_documents_directory_without_stats_json_shows_no_drop_reasons(cleaned: Path, tmp_path: Path, capsys) -> None:
    """stats.json is optional in the contract (another tool may write the directory): inspect says the
    reasons are unknown rather than failing."""
    copy = tmp_path / "clean"
    shutil.copytree(cleaned, copy)
    (copy / "stats.json").unlink()
    assert summarize(str(copy)).stats == {}
    assert cli.main(["inspect", str(copy)]) == 0
    assert "no stats.json: drop reasons unknown" in capsys.readouterr().out


def test_fewer_than_one_removal_a_reason_is_refused(cleaned: Path, capsys) -> None:
    with pytest.raises(ValueError, match="removals must be at least 1, got 0"):
        summarize(str(cleaned), removals=0)
    for count in ("0", "-2"):
        with pytest.raises(SystemExit):
            cli.main(["inspect", str(cleaned), "--removals", count])
        assert f"--removals: must be a positive int, got '{count}'" in capsys.readouterr().err

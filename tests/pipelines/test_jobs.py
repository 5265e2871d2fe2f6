"""dew.pipelines.jobs is the one list of jobs: the usage text, the launcher, metadata.json and the docs follow it."""

from __future__ import annotations

import dataclasses
import sys
from pathlib import Path

import pytest

from dew.pipelines import cli, metadata
from dew.pipelines.jobs import JOBS

ROOT = Path(__file__).resolve().parents[2]


def test_metadata_json_and_the_docs_table_agree_with_the_jobs() -> None:
    assert metadata.stale() == [], "run python -m dew.pipelines.metadata --write"
    assert metadata.main(["--check"]) == 0


def test_a_changed_declaration_makes_both_files_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    renamed = (dataclasses.replace(JOBS[0], summary="something else entirely"), *JOBS[1:])
    monkeypatch.setattr(metadata, "JOBS", renamed)
    assert set(metadata.stale()) == {metadata.METADATA, metadata.DOCS}
    assert metadata.main(["--check"]) == 1


def test_usage_and_the_launcher_offer_every_declared_job(capsys: pytest.CaptureFixture[str]) -> None:
    usage = cli.usage()
    for job in JOBS:
        assert job.name in usage and job.summary in usage
        assert callable(job.load().parser) and callable(job.load().main)
    sys.path.insert(0, str(ROOT / "pipelines/dataflow"))
    try:
        import launch
    finally:
        sys.path.pop(0)
    with pytest.raises(SystemExit):
        launch.run(["--job", "detokenize"])
    refusal = capsys.readouterr().err
    assert all(job.name in refusal for job in JOBS)


def test_the_flag_reference_lists_every_flag_with_its_default() -> None:
    reference = metadata.flag_reference()
    for job in JOBS:
        section = reference.split(f"`dew-preprocess {job.name}`")[1].split("`dew-preprocess ")[0]
        for action in job.load().parser()._actions:
            if action.option_strings and action.help != "==SUPPRESS==" and action.dest != "help":
                row = next(line for line in section.splitlines() if line.startswith(f"| `{action.option_strings[0]}"))
                assert action.required or action.default in (None, []) or "`" in row.split("|")[2]
    assert "| `--max_drop_fraction` | `0.5` |" in reference

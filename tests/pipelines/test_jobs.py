"""dew.pipelines.jobs is the one list of jobs: the usage text, the launcher, metadata.json and the docs follow it."""

from __future__ import annotations

import dataclasses
import sys
import tomllib
from pathlib import Path

import pytest

from dew.pipelines import cli, generated, jobs, metadata
from dew.pipelines.jobs import JOBS

ROOT = Path(__file__).resolve().parents[2]


def test_each_job_is_what_its_module_declares() -> None:
    """JOBS reads the declarations from source; importing each module gives the same jobs, in place order."""
    assert [job.name for job in JOBS][:1] == ["tokenize"]  # the flex template's default
    for job in JOBS:
        assert dataclasses.replace(job.load().JOB, module=job.module) == job
    assert [job.place for job in JOBS] == sorted({job.place for job in JOBS})
    assert set().union(*(job.extras for job in JOBS)) <= set(
        tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]
    )


def test_a_declaration_that_is_not_literal_is_refused_by_name(tmp_path: Path, monkeypatch: pytest.MonkeyPatch) -> None:
    package = tmp_path / "somejobs"
    package.mkdir()
    (package / "__init__.py").write_text("")
    (package / "a.py").write_text('JOB = Job(name="a", place=1, summary="x")\n')
    (package / "b.py").write_text('SUMMARY = "y"\nJOB = Job(\n    name="b",\n    place=2,\n    summary=SUMMARY,\n)\n')
    monkeypatch.syspath_prepend(str(tmp_path))
    with pytest.raises(ValueError, match=r"somejobs\.b: JOB = Job"):
        jobs.declared("somejobs")
    (package / "b.py").write_text('JOB = Job(\n    name="b",\n    place=1,\n    summary="y",\n)\n')
    with pytest.raises(ValueError, match=r"jobs somejobs\.a and somejobs\.b declare the same place"):
        jobs.declared("somejobs")
    (package / "b.py").write_text('JOB = Job(\n    name="b",\n    place=0,\n    summary="y",\n    extras=["hf"],\n)\n')
    assert [(job.name, job.module, job.extras) for job in jobs.declared("somejobs")] == [
        ("b", "somejobs.b", ("hf",)),
        ("a", "somejobs.a", ()),
    ]


def test_metadata_json_and_the_docs_table_agree_with_the_jobs() -> None:
    assert metadata.stale() == [], "run python -m dew.pipelines.metadata --write"
    assert metadata.main(["--check"]) == 0


def test_a_changed_declaration_makes_both_files_stale(monkeypatch: pytest.MonkeyPatch) -> None:
    renamed = (dataclasses.replace(JOBS[0], summary="something else entirely"), *JOBS[1:])
    monkeypatch.setattr(metadata, "JOBS", renamed)
    assert set(metadata.stale()) == {metadata.METADATA, metadata.DOCS}
    assert metadata.main(["--check"]) == 1
    # The one check of every generated file names them too.
    assert {str(metadata.METADATA), str(metadata.DOCS)} <= set(generated.stale())
    assert generated.main(["--check"]) == 1


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

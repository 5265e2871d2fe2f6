"""The dew-preprocess console script and the Dataflow packaging around it."""

from __future__ import annotations

import json
import re
import subprocess
import sys
import tomllib
from pathlib import Path

import pytest

from dew.pipelines import cli, common
from dew.pipelines.jobs import JOBS

ROOT = Path(__file__).resolve().parents[2]


def test_usage_lists_every_job_without_importing_beam() -> None:
    code = "import sys; from dew.pipelines import cli; cli.main(['--help']); print('apache_beam' in sys.modules)"
    out = subprocess.run([sys.executable, "-c", code], capture_output=True, text=True, check=True, timeout=120).stdout
    for job in ("tokenize", "pack", "plan-mixture"):
        assert job in out
    assert out.strip().endswith("False")


def test_unknown_job_is_a_usage_error(capsys: pytest.CaptureFixture[str]) -> None:
    assert cli.main(["detokenize"]) == 2
    assert "unknown job 'detokenize'" in capsys.readouterr().err
    assert cli.main([]) == 2


def test_console_script_is_declared() -> None:
    scripts = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["scripts"]
    assert scripts["dew-preprocess"] == "dew.pipelines.cli:main"


def test_switches_take_flex_template_values() -> None:
    import argparse

    parser = argparse.ArgumentParser()
    common.switch(parser, "--pack", "")
    assert parser.parse_args([]).pack is False
    assert parser.parse_args(["--pack"]).pack is True
    assert parser.parse_args(["--pack=true"]).pack is True
    assert parser.parse_args(["--pack=false"]).pack is False
    with pytest.raises(SystemExit):
        parser.parse_args(["--pack=maybe"])


def test_job_flags_and_beam_flags_part_ways() -> None:
    from dew.pipelines import tokenize_job

    args, rest = tokenize_job.parser().parse_known_args(
        ["--input", "x.jsonl", "--output", "o", "--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    )
    assert args.input == ["x.jsonl"] and rest == ["--runner", "DataflowRunner", "--project", "p", "--region", "r"]
    options = common.pipeline_options(["--direct_num_workers=3"])
    assert options.get_all_options()["direct_running_mode"] == "multi_processing"
    assert options.get_all_options()["direct_num_workers"] == 3


def test_dockerfile_pins_the_beam_of_pyproject() -> None:
    dependencies = tomllib.loads((ROOT / "pyproject.toml").read_text())["project"]["optional-dependencies"]["beam"]
    pinned = next(re.search(r"==([\d.]+)", d)[1] for d in dependencies if d.startswith("apache-beam"))
    dockerfile = (ROOT / "pipelines/dataflow/Dockerfile").read_text()
    assert re.search(r"^ARG BEAM_VERSION=([\d.]+)$", dockerfile, re.M)[1] == pinned
    assert "FROM apache/beam_python3.11_sdk:${BEAM_VERSION}" in dockerfile
    assert "FLEX_TEMPLATE_PYTHON_PY_FILE=/opt/dew/pipelines/dataflow/launch.py" in dockerfile


def test_flex_template_parameters_are_flags_of_the_jobs() -> None:
    metadata = json.loads((ROOT / "pipelines/dataflow/metadata.json").read_text())
    known = {"job"}
    for job in JOBS:
        known |= {a.dest for a in job.load().parser()._actions}
    names = [p["name"] for p in metadata["parameters"]]
    assert set(names) <= known and len(names) == len(set(names))


def test_launch_dispatches_by_job(capsys: pytest.CaptureFixture[str]) -> None:
    sys.path.insert(0, str(ROOT / "pipelines/dataflow"))
    try:
        import launch
    finally:
        sys.path.pop(0)
    with pytest.raises(SystemExit):
        launch.run(["--job", "pack", "--help"])
    assert "dew-preprocess pack" in capsys.readouterr().out

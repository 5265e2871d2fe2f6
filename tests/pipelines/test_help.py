"""`dew-preprocess JOB --help` imports no Beam and lists the Beam options a job passes through; on a
host without the beam extra every Beam job names `dew[beam]` instead of dying on a ModuleNotFoundError.
A host without the extra is simulated in a subprocess by an import hook that refuses apache_beam."""

from __future__ import annotations

import json
import subprocess
import sys

import pytest

from dew.pipelines import job_help
from dew.pipelines.jobs import JOBS

BLOCKER = """
import sys
class NoBeam:
    def find_spec(self, name, path=None, target=None):
        if name == "apache_beam" or name.startswith("apache_beam."):
            raise ModuleNotFoundError(f"No module named {name!r}", name=name)
        return None
sys.meta_path.insert(0, NoBeam())
from dew.pipelines.cli import main
code = main(sys.argv[1:])
assert "apache_beam" not in sys.modules
sys.exit(code)
"""


def without_beam(*args: str) -> subprocess.CompletedProcess[str]:
    return subprocess.run(
        [sys.executable, "-c", BLOCKER, *args], capture_output=True, text=True, timeout=120, check=False
    )


@pytest.mark.parametrize("job", JOBS, ids=lambda job: job.name)
def test_help_needs_no_beam_and_lists_what_is_passed_to_beam(job) -> None:
    done = without_beam(job.name, "--help")
    assert done.returncode == 0, done.stderr
    assert done.stdout == json.loads(job_help.HELP.read_text())[job.name]
    assert done.stdout.startswith(f"usage: dew-preprocess {job.name} ")
    if job.beam:
        assert "Beam pipeline options, passed through to Beam" in done.stdout
        for flag in ("--runner", "--project", "--region", "--temp_location", "--direct_num_workers"):
            assert f"  {flag}: " in done.stdout
        assert "--worker_machine_type" in done.stdout  # and the rest by name
    else:
        assert "Beam pipeline options" not in done.stdout


@pytest.mark.parametrize("job", [job for job in JOBS if job.beam], ids=lambda job: job.name)
def test_a_beam_job_without_the_beam_extra_names_the_extra(job) -> None:
    done = without_beam(job.name, "--input", "in/", "--output", "out/", "--corpus", "c/")
    assert done.returncode == 2, done.stderr
    assert done.stderr == f"dew-preprocess {job.name} needs apache_beam: pip install 'dew[beam]'\n"

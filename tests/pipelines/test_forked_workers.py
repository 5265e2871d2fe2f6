"""Local workers forked from the launcher: taken when it is safe, Beam's own worker processes otherwise."""

from __future__ import annotations

import json
import os
import subprocess
import sys
import textwrap
import threading
from pathlib import Path

import pytest

from dew.pipelines import zygotes

# Two runs in one fresh launcher that allows forking: the first forks its workers; the second, in a
# process the first ran a job in, must start workers of its own. Each worker writes whether it holds the
# marker set in the launcher's memory (only a fork has it) and whether it is another process.
_LAUNCHER = textwrap.dedent(
    """
    import json, os, sys
    import apache_beam as beam
    from dew.pipelines import common, zygotes

    zygotes.allow()  # as the dew-preprocess program does
    sys.dew_test_marker = True
    launcher = os.getpid()

    def where(_):
        return getattr(sys, "dew_test_marker", False), os.getpid() != launcher

    def record(seen, path):
        with open(path, "a") as f:
            f.write(json.dumps(seen) + "\\n")

    common.configure_logging()
    for run in range(2):
        pipeline = common.make_pipeline(common.pipeline_options(["--direct_num_workers=2"]))
        (
            pipeline
            | beam.Create(range(40))
            | beam.Reshuffle()
            | beam.Map(where)
            | beam.Distinct()
            | beam.Map(record, os.environ["OUT"] + str(run))
        )
        pipeline.run().wait_until_finish()
    """
)


def _run_twice(tmp_path: Path, environment: dict[str, str] | None = None) -> list[list[list[bool]]]:
    done = subprocess.run(
        [sys.executable, "-c", _LAUNCHER],
        capture_output=True,
        text=True,
        timeout=300,
        check=False,
        env={**os.environ, **(environment or {}), "OUT": str(tmp_path / "seen")},
    )
    assert done.returncode == 0, done.stderr[-3000:]
    return [sorted(json.loads(line) for line in (tmp_path / f"seen{n}").read_text().splitlines()) for n in range(2)]


@pytest.mark.beam
def test_a_fresh_launcher_forks_its_workers_and_a_later_run_starts_its_own(tmp_path: Path) -> None:
    first, second = _run_twice(tmp_path)
    # Every element ran in a worker process other than the launcher.
    assert all(other for _, other in first + second)
    assert all(marked for marked, _ in first), "the first run's workers were not forked from the launcher"
    assert not any(marked for marked, _ in second), "only a launcher's first run may fork"


def test_no_fork_unless_the_launcher_allows_it_nor_while_another_thread_runs(monkeypatch) -> None:
    assert not zygotes.can_fork()  # pytest's process never said it was a fresh launcher
    monkeypatch.setattr(zygotes, "_allowed", None)
    zygotes.allow()
    stop = threading.Event()
    thread = threading.Thread(target=stop.wait)
    thread.start()
    try:
        assert not zygotes.can_fork()
    finally:
        stop.set()
        thread.join()


@pytest.mark.beam
def test_dew_fork_workers_0_gives_even_a_fresh_launcher_beams_own_workers(tmp_path: Path) -> None:
    first, second = _run_twice(tmp_path, {zygotes.SWITCH: "0"})
    assert all(other for _, other in first + second)
    assert not any(marked for marked, _ in first + second)

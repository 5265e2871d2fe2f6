"""Flex-template entry point: `--job NAME` picks one of dew.pipelines.jobs (the first when unset), every
other flag goes to that job.

The launcher image runs this file as a script, so it lives outside the dew package: a script's own
directory goes first on sys.path, where any job module named like a standard library module would shadow it.
"""

from __future__ import annotations

import argparse
import sys

from dew.pipelines.cli import main
from dew.pipelines.jobs import JOBS


def run(argv: list[str]) -> int:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--job", default=JOBS[0].name, choices=[job.name for job in JOBS])
    known, rest = chooser.parse_known_args(argv)
    return main([known.job, *rest])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

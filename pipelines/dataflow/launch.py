"""Flex-template entry point: `--job tokenize|pack|plan-mixture` picks the job, every other flag goes to it.

The launcher image runs this file as a script, so it lives outside the dew package: a script's own
directory goes first on sys.path, where any job module named like a standard library module would shadow it.
"""

from __future__ import annotations

import argparse
import sys

from dew.pipelines.cli import JOBS, main


def run(argv: list[str]) -> int:
    chooser = argparse.ArgumentParser(add_help=False)
    chooser.add_argument("--job", default="tokenize", choices=sorted(JOBS))
    known, rest = chooser.parse_known_args(argv)
    return main([known.job, *rest])


if __name__ == "__main__":
    sys.exit(run(sys.argv[1:]))

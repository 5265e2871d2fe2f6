"""The `dew-preprocess` console script: `dew-preprocess tokenize|pack|plan-mixture [flags] [beam flags]`."""

from __future__ import annotations

import importlib
import sys
from collections.abc import Sequence

JOBS = {
    "tokenize": ("dew.pipelines.tokenize_job", "raw text files → a committed token corpus"),
    "pack": ("dew.pipelines.pack", "a corpus's document index and packing plans, ahead of training"),
    "plan-mixture": ("dew.pipelines.plan_mixture", "windows and epochs per corpus of a weighted mixture"),
}


def usage() -> str:
    lines = ["usage: dew-preprocess JOB [flags] [Beam pipeline flags]", "", "jobs:"]
    lines += [f"  {name:<13} {summary}" for name, (_, summary) in JOBS.items()]
    lines += ["", "`dew-preprocess JOB --help` lists a job's flags; the rest go to Beam (--runner, --project, ...)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    job = JOBS.get(args[0])
    if job is None:
        print(f"dew-preprocess: unknown job {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    # The job module, and with it apache_beam, is imported only once a job is named: --help stays fast.
    importlib.import_module(job[0]).main(args[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `dew-preprocess` console script: `dew-preprocess JOB [flags] [beam flags]`, JOB one of dew.pipelines.jobs."""

from __future__ import annotations

import sys
from collections.abc import Sequence

from dew.pipelines.jobs import JOBS, find


def usage() -> str:
    width = max(len(job.name) for job in JOBS) + 2
    lines = ["usage: dew-preprocess JOB [flags] [Beam pipeline flags]", "", "jobs:"]
    lines += [f"  {job.name:<{width}}{job.summary}" for job in JOBS]
    lines += ["", "`dew-preprocess JOB --help` lists a job's flags; the rest go to Beam (--runner, --project, ...)."]
    return "\n".join(lines)


def main(argv: Sequence[str] | None = None) -> int:
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else 2
    job = find(args[0])
    if job is None:
        print(f"dew-preprocess: unknown job {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return 2
    # The job module, and with it apache_beam, is imported only once a job is named: --help stays fast.
    job.load().main(args[1:])
    return 0


if __name__ == "__main__":
    sys.exit(main())

"""The `dew-preprocess` console script: `dew-preprocess JOB [flags] [beam flags]`, JOB one of dew.pipelines.jobs.

A mistake of the user's (a refused flag, a missing input, an output holding another run, a --strict
failure, a job that would commit too little) ends with one message on stderr and exit code 2; a
traceback would bury it. Anything else is a bug, and keeps its traceback. `--verbose` shows the
traceback of a mistake too.
"""

from __future__ import annotations

import os
import re
import sys
import traceback
from collections.abc import Sequence

# Only what usage and --help need is imported here: flags imports dew.data (numpy and more), and a job
# module Beam, once a job runs; `dew-preprocess JOB --help` prints help.json and stays well under a second.
from dew.pipelines import job_help, progress_line, zygotes
from dew.pipelines.jobs import JOBS, Job, find
from dew.preprocess import quiet

USAGE_EXIT = 2
# A reader that closed the pipe early (`dew-preprocess inspect c/ | head`) ends the job as SIGPIPE would.
BROKEN_PIPE_EXIT = 128 + 13
# Raised on the launcher only: there, a missing file is a path the user gave.
LAUNCHER_ERRORS = ("builtins.FileNotFoundError",)
_BEAM_STEP = re.compile(r" \[while running '[^']*'\]\s*$")


def usage() -> str:
    width = max(len(job.name) for job in JOBS) + 2
    lines = ["usage: dew-preprocess JOB [flags] [Beam pipeline flags]", "", "jobs:"]
    lines += [f"  {job.name:<{width}}{job.summary}" for job in JOBS]
    lines += ["", "`dew-preprocess JOB --help` lists a job's flags; the rest go to Beam (--runner, --project, ...)."]
    return "\n".join(lines)


def user_error(error: BaseException) -> str | None:
    """The message of a mistake the user can fix, wherever it was raised; None for anything else.

    A user error is a subclass of dew.data.errors.UserError: recognised by its class here, or by its
    qualified name in the text Beam relays from a worker (the multi-process runner and Dataflow relay
    the worker's traceback only); the job's module, imported by now, defines every one it raises.
    """
    from dew.data.errors import qualified_name, user_error_names  # not at the top: --help stays cheap

    known = {*user_error_names(), *LAUNCHER_ERRORS}
    seen: BaseException | None = error
    while seen is not None:
        if {qualified_name(cls) for cls in type(seen).__mro__} & known:
            return _BEAM_STEP.sub("", str(seen))
        # `raise ... from None` hides the context on purpose: a FileNotFoundError a library caught and
        # replaced is not a path the user gave, and must not turn the replacement into a usage error.
        seen = seen.__cause__ or (None if seen.__suppress_context__ else seen.__context__)
    # The last relayed line is the innermost: Beam wraps a worker's error once per step it passed.
    # A relayed message runs from its class name to the blank line (or the end) after it.
    names = "|".join(map(re.escape, sorted(user_error_names())))
    relayed = re.findall(rf"^(?:{names}): (.*?)(?:\n\n|\Z)", str(error), re.M | re.S)
    return _BEAM_STEP.sub("", relayed[-1]) if relayed else None


def missing_extra(job: Job, error: ModuleNotFoundError) -> str | None:
    """The line naming the dew extra that installs the module `error` did not find; None for a module no
    extra installs (a bug, or a broken environment: its traceback stays)."""
    from dew.data.extras import extra_of

    if error.name is None:
        return None
    try:
        extra = extra_of(error.name)
    except KeyError:
        return None
    return f"dew-preprocess {job.name} needs {error.name.split('.')[0]}: pip install 'dew[{extra}]'"


def main(argv: Sequence[str] | None = None) -> int:
    if argv is None:
        # Run as a program, in a process of its own that has done nothing yet: its workers can be forked.
        zygotes.allow()
        zygotes.bound_malloc()  # before the job allocates, in the launcher and so in the workers it forks
        progress_line.count_from_process_start()
    args = list(sys.argv[1:] if argv is None else argv)
    if not args or args[0] in ("-h", "--help"):
        print(usage())
        return 0 if args else USAGE_EXIT
    job = find(args[0])
    if job is None:
        print(f"dew-preprocess: unknown job {args[0]!r}\n\n{usage()}", file=sys.stderr)
        return USAGE_EXIT
    if any(arg in ("-h", "--help") for arg in args[1:]):
        text = job_help.stored(job.name)  # rendered ahead of time: printing it imports no Beam
        if text is not None:
            print(text, end="")
            return 0
    from dew.pipelines import flags

    verbose = flags.verbose(args)
    previous = os.environ.get(quiet.VERBOSE)
    if verbose:
        os.environ[quiet.VERBOSE] = "1"  # workers inherit it: they print every traceback too
    try:
        # The job module, and with it apache_beam, is imported only once a job is named: --help stays fast.
        if argv is None and job.beam and not {"-h", "--help"} & set(args[1:]):
            with progress_line.program_line(job.name):  # from now on, start-up included
                job.load().main(args[1:])
        else:
            job.load().main(args[1:])
    except ModuleNotFoundError as error:
        missing = missing_extra(job, error)
        if missing is None:
            raise
        print(missing, file=sys.stderr)
        return USAGE_EXIT
    except BrokenPipeError:
        # Python would report the closed pipe as a traceback, and again when it flushes stdout at exit.
        os.dup2(os.open(os.devnull, os.O_WRONLY), sys.stdout.fileno())
        return BROKEN_PIPE_EXIT
    except Exception as error:
        message = user_error(error)
        if message is None:
            raise
        if verbose:
            traceback.print_exc()
        print(f"dew-preprocess {job.name}: {message}", file=sys.stderr)
        return USAGE_EXIT
    finally:
        if verbose and previous is None:
            os.environ.pop(quiet.VERBOSE, None)
    return 0


if __name__ == "__main__":
    sys.exit(main())

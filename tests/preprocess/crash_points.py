"""Runs a dew-preprocess job in this process and stops it dead at one of its changes to the file system.

`python -m tests.preprocess.crash_points AT JOB [flags]`: every rename, copy, file creation, delete (one
file at a time) and directory removal the job makes through Beam's FileSystems or the os module is a
point, counted in the order the job makes them. AT is a number N (the Nth point) or `@TEXT` (the first
point whose description holds TEXT, e.g. `@meta.json`); before it the process signals itself: SIGKILL,
as a preemption or an OOM kill would, with nothing cleaned up, or the signal DEW_CRASH_SIGNAL names
(`SIGSTOP`, to pause the job there while another runs). Exit code 0 means the job finished before the
point. With AT = 0 the number of points is printed on stdout's last line; DEW_CRASH_TRACE=1 prints each.
The runner must be in-process (`--direct_running_mode=in_memory`) so the workers' points are counted.
"""

from __future__ import annotations

import functools
import os
import shutil
import signal
import sys
from collections.abc import Callable
from typing import Any

_seen = 0


def _point(at: str, what: str) -> None:
    global _seen
    _seen += 1
    if os.environ.get("DEW_CRASH_TRACE"):
        print(f"point {_seen}: {what}", file=sys.stderr, flush=True)
    if (at.startswith("@") and at[1:] in what) or at == str(_seen):
        at_done = os.environ.get("DEW_CRASH_SIGNAL", "SIGKILL")
        os.kill(os.getpid(), getattr(signal, at_done))


def _counted(at: str, call: Callable[..., Any]) -> Callable[..., Any]:
    @functools.wraps(call)
    def wrapper(*args: Any, **kwargs: Any) -> Any:
        _point(at, f"{call.__name__} {args}")
        return call(*args, **kwargs)

    return wrapper


def install(at: str) -> None:
    """Counts every change the job makes to its files, signalling the process at the point `at` names."""
    from apache_beam.io.filesystems import FileSystems

    delete = FileSystems.delete

    def one_by_one(paths: list[str]) -> None:
        for path in paths:  # a kill can land between two files of one call
            _point(at, f"delete {path}")
            delete([path])

    FileSystems.delete = staticmethod(one_by_one)  # type: ignore[method-assign]
    FileSystems.rename = staticmethod(_counted(at, FileSystems.rename))  # type: ignore[method-assign]
    FileSystems.create = staticmethod(_counted(at, FileSystems.create))  # type: ignore[method-assign]
    os.replace = _counted(at, os.replace)
    shutil.copyfile = _counted(at, shutil.copyfile)
    shutil.rmtree = _counted(at, shutil.rmtree)  # type: ignore[assignment]


def main(argv: list[str]) -> int:
    install(argv[0])
    from dew.pipelines import cli

    code = cli.main(argv[1:])
    if argv[0] == "0":
        print(f"points {_seen}")
    return code or 0


if __name__ == "__main__":
    sys.exit(main(sys.argv[1:]))

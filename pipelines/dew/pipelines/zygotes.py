"""Children forked from a launcher, each waiting to become one local Beam worker (dew.pipelines.forked_workers).

Nothing here imports Beam, so that the dew-preprocess program can `allow()` forking before it loads a job.
A fork is taken only where it is safe. The process must be a launcher of its own that has run no job
yet and says so (`allow()`: the dew-preprocess program, a benchmark), since native thread pools a job
started in this process before (ArrayRecord's, for one) are missing in a child, which then crashes;
and at the fork it must run on Linux, hold no other Python thread (a lock another thread held would
stay held in the child) and have no gRPC thread (gRPC does not survive a fork).
"""

from __future__ import annotations

import contextlib
import json
import logging
import os
import signal
import sys
import threading
import traceback

# Thread names gRPC's core gives the threads it starts on first use (comm is cut at 15 characters).
_GRPC_THREADS = ("grpc", "event_engine", "lifeguard")


_allowed: int | None = None  # the pid of a launcher that may fork the workers of its first local run
# DEW_FORK_WORKERS=0 gives every local run Beam's own worker processes: the way out should a fork misbehave
# on some platform, and a way to compare the two.
SWITCH = "DEW_FORK_WORKERS"


def allow() -> None:
    """Lets this process fork the workers of its first local run; for a launcher that owns a fresh process,
    called before it does any work. Never from a library call: the process may hold what a fork breaks."""
    global _allowed
    _allowed = os.getpid()


def can_fork() -> bool:
    """Whether a child forked now would start clean: an allowed launcher on Linux, one Python thread,
    gRPC not yet started, and DEW_FORK_WORKERS not set to 0."""
    if os.environ.get(SWITCH, "1").strip().lower() in ("0", "false", "no", "off"):
        return False
    if _allowed != os.getpid() or not sys.platform.startswith("linux") or threading.active_count() != 1:
        return False
    try:
        tasks = os.listdir("/proc/self/task")
        names = []
        for task in tasks:
            with open(f"/proc/self/task/{task}/comm") as f:
                names.append(f.read().strip())
    except OSError:
        return False
    return not any(name.startswith(_GRPC_THREADS) for name in names)


class Zygote:
    """A forked child waiting to become one worker: it reads the worker's environment from a pipe."""

    def __init__(self, pid: int, pipe: int) -> None:
        self.pid, self.pipe = pid, pipe

    def start(self, environment: dict[str, str]) -> None:
        with os.fdopen(self.pipe, "wb") as pipe:
            pipe.write(json.dumps(environment).encode())

    def dismiss(self) -> None:
        """Ends a child no worker was asked of: an empty message tells it to exit."""
        os.close(self.pipe)
        os.waitpid(self.pid, 0)


# glibc's mallopt parameter for the size from which an allocation is its own mmap, returned on free.
_M_MMAP_THRESHOLD = -3
MMAP_THRESHOLD = 256 << 10


def bound_malloc() -> bool:
    """Fixes glibc's mmap threshold at 256 KiB in this process and the workers it forks; True when set.

    On DirectRunner a worker gets its whole share of a stage's grouped input as one message, and sends its
    output in 10 MiB chunks: buffers of megabytes, allocated and freed over and over. glibc raises its mmap
    threshold to the largest buffer freed (up to 32 MiB), so later ones come from the heap, which they leave
    fragmented and never give back: bench_clean_memory.py measured a clean worker's peak private memory at
    60,000 documents 424 MiB this way, 254 MiB with the threshold fixed. Left alone where the user set
    MALLOC_MMAP_THRESHOLD_ or the C library is not glibc.
    """
    if "MALLOC_MMAP_THRESHOLD_" in os.environ or not sys.platform.startswith("linux"):
        return False
    import ctypes

    try:
        mallopt = ctypes.CDLL(None).mallopt
    except (OSError, AttributeError):
        return False
    return bool(mallopt(_M_MMAP_THRESHOLD, MMAP_THRESHOLD))


def take_allowance() -> bool:
    """can_fork(), and from now on False in this process: only a launcher's first local run may fork."""
    global _allowed
    safe = can_fork()
    _allowed = None
    return safe


def fork(count: int) -> list[Zygote]:
    """`count` children waiting for their worker's environment; the caller starts or dismisses each."""
    zygotes: list[Zygote] = []
    for stream in (sys.stdout, sys.stderr):
        stream.flush()  # else a child exiting would write the launcher's buffered output again
    for _ in range(count):
        read, write = os.pipe()
        pid = os.fork()
        if pid == 0:  # the child: never returns into the launcher's stack
            os.close(write)
            for other in zygotes:
                os.close(other.pipe)  # so each child sees its own pipe end when the launcher closes it
            _become_worker(read)
        os.close(read)
        zygotes.append(Zygote(pid, write))
    return zygotes


def _become_worker(pipe: int) -> None:
    code = 1
    # A Ctrl-C meant for the launcher ends a waiting child through its closed pipe, without a traceback.
    signal.signal(signal.SIGINT, signal.SIG_IGN)
    try:
        with os.fdopen(pipe, "rb") as f:
            message = f.read()
        if not message:
            code = 0
            return
        os.environ.update(json.loads(message))
        _fresh_logging()
        signal.signal(signal.SIGINT, signal.default_int_handler)
        from apache_beam.runners.worker import sdk_worker_main

        sdk_worker_main.main([])
        code = 0
    except BaseException:
        traceback.print_exc()
    finally:
        for stream in (sys.stdout, sys.stderr):
            with contextlib.suppress(Exception):  # exiting regardless
                stream.flush()
        os._exit(code)


def _fresh_logging() -> None:
    """Logging as a new worker process has it: the launcher's handlers, levels and filters undone,
    so a worker's records go to the runner through Beam's handler only (and once)."""
    root = logging.getLogger()
    for handler in list(root.handlers):
        root.removeHandler(handler)
    for logger in [root, *logging.Logger.manager.loggerDict.values()]:
        if isinstance(logger, logging.Logger):
            logger.setLevel(logging.NOTSET if logger is not root else logging.WARNING)
            logger.filters.clear()

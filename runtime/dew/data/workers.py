"""Grain's worker processes: how many a host can give, and making sure none outlives its trainer.

Grain starts each worker with multiprocessing's spawn, which re-runs the trainer's main script in
the child; an unguarded script would start workers from every worker, so this refuses to start
them from a script's top level before any process exists. A worker watches its parent and exits as
soon as the trainer is gone, whatever killed it (SIGKILL included), so no worker keeps its memory
and /dev/shm segments under PID 1.
"""

from __future__ import annotations

import ast
import functools
import os
import sys
import threading
import time
from types import FrameType
from typing import TYPE_CHECKING, Any

if TYPE_CHECKING:
    import grain

    from dew.data.loading import Loading

# How often a worker checks that its trainer is still there: a dead trainer's workers are gone
# within about this long, and one getppid() a second costs nothing.
_PARENT_POLL_SECONDS = 1.0

_MAIN_GUARD_FIX = (
    'put the code that reads batches under `if __name__ == "__main__":` (or in a function called from '
    "there), or read in process with Loading(workers=0)"
)


def host_cores() -> int:
    """Cores this process may run on: its CPU affinity where the OS has one (containers, taskset)."""
    try:
        return len(os.sched_getaffinity(0))
    except AttributeError:  # macOS and Windows have no affinity call
        return os.cpu_count() or 1


def spare_cores() -> int:
    """Cores left for worker processes once the trainer has one of its own."""
    return max(0, host_cores() - 1)


def check_main_guard() -> None:
    """Refuses to start workers from the unguarded top level of the main script.

    Spawn runs the main script again in every worker, so top-level code that starts workers makes
    each worker fail while it bootstraps (and grain then waits on workers that never come). Caught
    here, in the trainer, it is one error before any process starts.
    """
    main = sys.modules.get("__main__")
    path = getattr(main, "__file__", None)
    _check_rerunnable(main, path)
    frame = _top_level_frame(main)
    if frame is None or path is None:
        return  # an interactive session or `python -c`: spawn has no script to re-run
    try:
        with open(path, encoding="utf-8") as script:
            tree = ast.parse(script.read())
    except (OSError, SyntaxError, UnicodeDecodeError):
        return  # not a source file spawn could re-run as such
    if not _guarded(tree, frame.f_lineno):
        raise RuntimeError(
            f"{path}, line {frame.f_lineno}: worker processes would start from the top level of the main "
            f"script, which every worker re-runs on start; {_MAIN_GUARD_FIX}"
        )


def _check_rerunnable(main: Any, path: str | None) -> None:
    """Refuses a main script spawn would look for and not find: one piped in (`python - <<EOF`).

    Its __file__ is "<stdin>", which spawn tries to run as a file in every worker; each worker dies as
    it starts and grain reports only that a worker was terminated. A script run by module name
    (`python -m`) is re-imported by that name instead, and a session without __file__ is not re-run.
    """
    if path is None or getattr(getattr(main, "__spec__", None), "name", None) is not None:
        return
    from multiprocessing import process

    # The directory the first process started in; typeshed does not declare it.
    original: str | None = getattr(process, "ORIGINAL_DIR", None)
    where = path if os.path.isabs(path) or original is None else os.path.join(original, path)
    if not os.path.exists(where):
        raise RuntimeError(
            f"the main script is {path!r}, not a file worker processes can re-run on start (a script piped "
            "into `python -`, say); save it to a file, with the code that reads batches under "
            '`if __name__ == "__main__":`, or read in process with Loading(workers=0)'
        )


def _top_level_frame(main: Any) -> FrameType | None:
    """The frame running the main script's module-level code, if this call came from it."""
    if main is None:
        return None
    frame: FrameType | None = sys._getframe(1)
    while frame is not None:
        if frame.f_code.co_name == "<module>" and frame.f_globals is main.__dict__:
            return frame
        frame = frame.f_back
    return None


def _guarded(tree: ast.Module, line: int) -> bool:
    """Whether `line` of the module lies in the body of an `if __name__ == "__main__":` block."""
    for node in ast.walk(tree):
        if isinstance(node, ast.If) and _tests_main(node.test):
            first, last = node.body[0].lineno, node.body[-1].end_lineno or node.body[-1].lineno
            if first <= line <= last:
                return True
    return False


def _tests_main(test: ast.expr) -> bool:
    names = {n.id for n in ast.walk(test) if isinstance(n, ast.Name)}
    constants = {n.value for n in ast.walk(test) if isinstance(n, ast.Constant)}
    return "__name__" in names and "__main__" in constants


def _exit_with_parent(parent: int, index: int, count: int) -> None:
    """Worker init: exits this worker once `parent` is gone.

    prctl(PR_SET_PDEATHSIG) would be instant, but it fires when the *thread* that started the
    worker ends, and grain starts workers from its own prefetch threads, which stop and restart
    (a set_state, say) while the workers go on; the parent id changes only when the process is gone.
    `index` and `count` are grain's worker numbering.
    """
    del index, count
    exit_with_parent(parent)


def exit_with_parent(parent: int) -> None:
    """Starts a thread that ends this process within about a second of `parent` being gone."""

    def watch() -> None:
        while os.getppid() == parent:
            time.sleep(_PARENT_POLL_SECONDS)
        # A normal exit would flush queues to a trainer that no longer reads them and block for ever.
        os._exit(1)

    threading.Thread(target=watch, name="dew-exit-with-trainer", daemon=True).start()


def prefetch(ds: grain.IterDataset, loading: Loading) -> grain.IterDataset:
    """`ds` read by `loading.workers` grain worker processes that exit with this process."""
    import grain
    from absl import flags

    check_main_guard()
    # Grain's workers read absl flags; outside an absl app nobody parsed them, so take the defaults.
    if not flags.FLAGS.is_parsed():
        flags.FLAGS.mark_as_parsed()
    options = grain.MultiprocessingOptions(num_workers=loading.workers, per_worker_buffer_size=loading.worker_buffer)
    return ds.mp_prefetch(options, worker_init_fn=functools.partial(_exit_with_parent, os.getpid()))

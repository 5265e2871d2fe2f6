"""A hang guard for tests that talk to servers: a block still running after its bound fails, showing every
thread's stack, instead of hanging the suite. Never a speed test: the bound is generous."""

from __future__ import annotations

import contextlib
import signal
import sys
import threading
import traceback
from collections.abc import Iterator


class Hung(Exception):
    """A test ran past its hang guard."""


@contextlib.contextmanager
def bounded(seconds: float) -> Iterator[None]:
    """A hang guard, never a speed test: a block still running after `seconds` fails with Hung, which shows
    every thread's stack. Main thread only (SIGALRM), where pytest runs tests."""

    def hung(signum: int, frame: object) -> None:
        stacks = "\n".join(
            f"--- {names.get(ident, ident)}\n{''.join(traceback.format_stack(stack))}"
            for names in [{t.ident: t.name for t in threading.enumerate()}]
            for ident, stack in sys._current_frames().items()
        )
        raise Hung(f"still running after {seconds:g} s; every thread's stack:\n{stacks}")

    previous = signal.signal(signal.SIGALRM, hung)
    signal.setitimer(signal.ITIMER_REAL, seconds)
    try:
        yield
    finally:
        signal.setitimer(signal.ITIMER_REAL, 0)
        signal.signal(signal.SIGALRM, previous)

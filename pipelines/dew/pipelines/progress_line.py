"""The launcher's progress line: one line every few seconds, through every phase of a job to its commit.

    dew-preprocess tokenize: 14 s, phase 2/4 tokenize: 40,960 of 120,000 documents (34.1%), 3,410 documents/s, ETA 23 s

The job declares its phases in order (Phase); its steps count into dew.preprocess.progress tallies,
which this sums. The line names the latest phase under way, its units done of the total (the total
comes from the launcher, or from the step that learns it), its rate since this line first saw it move,
its percent and the time left at that rate. A phase whose total is in another measure than its units
(input bytes) takes its percent and ETA from that measure. The clock starts when the launcher's
process did (for the dew-preprocess program; a job called as a function counts from its run), so
the final report's wall clock (common.report) includes start-up.
"""

from __future__ import annotations

import contextlib
import os
import shutil
import sys
import tempfile
import threading
import time
from collections.abc import Iterator, Sequence
from typing import TextIO

from dew.preprocess import progress
from dew.preprocess.progress import Phase

# At most 10 s between lines, as a user watching a long run expects; DEW_PROGRESS_SECONDS sets it.
SECONDS = 5.0


_program: float | None = None  # when the dew-preprocess program's process started, once it says it is one


def count_from_process_start() -> None:
    """For the dew-preprocess program: its clocks start when its process did, Python's start-up included."""
    global _program
    _program = _process_started()


def launcher_started(default: float | None = None) -> float:
    """Where a job's wall clock starts: the program's process start, else `default` (now if None)."""
    if _program is not None:
        return _program
    return time.monotonic() if default is None else default


def _process_started() -> float:
    """time.monotonic() at which this process started (Linux: /proc), else when this module was imported."""
    try:
        with open("/proc/self/stat") as f:
            ticks = int(f.read().rsplit(")", 1)[1].split()[19])
        with open("/proc/uptime") as f:
            uptime = float(f.read().split()[0])
        age = uptime - ticks / os.sysconf("SC_CLK_TCK")
        return time.monotonic() - max(0.0, age)
    except (OSError, ValueError, IndexError):
        return _IMPORTED


_IMPORTED = time.monotonic()
_open: ProgressLine | None = None  # the dew-preprocess program's line, opened before its job loads


@contextlib.contextmanager
def program_line(job: str) -> Iterator[ProgressLine]:
    """The dew-preprocess program's line for `job`, printing from before the job loads; the job's run
    (dew.pipelines.common.run) gives it its phases."""
    global _open
    with ProgressLine(job, ()) as line:
        _open = line
        line.start()
        yield line


def open_line() -> ProgressLine | None:
    """The program's line, when the program opened one."""
    return _open


def _amount(value: float, measure: str | None) -> str:
    if measure == "bytes":
        return f"{value / 1e6:,.1f} MB"
    return f"{value:,.0f}"


def _duration(seconds: float) -> str:
    seconds = max(0, round(seconds))
    if seconds < 120:
        return f"{seconds} s"
    if seconds < 7200:
        return f"{seconds // 60} min {seconds % 60:02d} s"
    return f"{seconds // 3600} h {seconds % 3600 // 60:02d} min"


class ProgressLine:
    """Sums the job's tallies and prints its line; a context manager around the run.

    Entering names the tally directory in the environment (workers started later inherit it);
    `start()` starts the printing thread and `pause()` stops it (a launcher that forks its workers
    pauses it over the fork: a fork wants one thread); leaving stops it and removes the directory.
    Before the job's phases are known (`follow`), the line says the job is starting: the dew-preprocess
    program opens it before it loads the job, so a slow start-up shows too.
    """

    def __init__(
        self, job: str, phases: Sequence[Phase], *, out: TextIO | None = None, every: float | None = None
    ) -> None:
        self.job = job
        self.phases = tuple(phases)
        self.out = out if out is not None else sys.stderr
        self.every = every if every is not None else float(os.environ.get("DEW_PROGRESS_SECONDS", SECONDS))
        self.started = launcher_started()
        self.directory: str | None = None
        self._seen: dict[str, tuple[float, float]] = {}  # phase: (time, progress) when first seen moving
        self._stop = threading.Event()
        self._thread: threading.Thread | None = None
        self._previous: str | None = None

    def __enter__(self) -> ProgressLine:
        self.directory = tempfile.mkdtemp(prefix="dew-progress-")
        self._previous = os.environ.get(progress.ENV)
        os.environ[progress.ENV] = self.directory
        return self

    def start(self) -> None:
        if self._thread is None and self.directory is not None:
            self._stop = threading.Event()
            self._thread = threading.Thread(target=self._run, name="dew-progress", daemon=True)
            self._thread.start()

    def pause(self) -> None:
        """Stops the printing thread until the next start()."""
        self._stop.set()
        if self._thread is not None:
            self._thread.join()
            self._thread = None

    def follow(self, job: str, phases: Sequence[Phase]) -> None:
        """From now on the line shows `job`'s `phases`."""
        self.job, self.phases = job, tuple(phases)

    def __exit__(self, *_: object) -> None:
        self.pause()
        global _open
        if _open is self:
            _open = None
        if self._previous is None:
            os.environ.pop(progress.ENV, None)
        else:
            os.environ[progress.ENV] = self._previous
        if self.directory is not None:
            shutil.rmtree(self.directory, ignore_errors=True)

    def _run(self) -> None:
        while not self._stop.wait(self.every):
            print(self.line(), file=self.out, flush=True)

    def line(self, now: float | None = None) -> str:
        """The line as of now: the latest phase under way, or what the job is waiting for."""
        now = time.monotonic() if now is None else now
        head = f"dew-preprocess {self.job}: {_duration(now - self.started)}"
        found = progress.read_all(self.directory) if self.directory else {}
        if not self.phases:
            return f"{head}, under way (loading the job and planning, or a step with no phases to count)"
        states = [self._state(phase, found) for phase in self.phases]
        moving = [i for i, (done, _, _) in enumerate(states) if done]
        if not moving:
            return f"{head}, starting (phase 1/{len(self.phases)} {self.phases[0].name} has not begun)"
        # The latest phase that has done anything, or the next one once that is complete and the next
        # knows its total (its input is on its way: a shuffle, the writing of a large shard).
        current = moving[-1]
        while current + 1 < len(states) and _complete(states[current]) and states[current + 1][2] is not None:
            current += 1
        phase = self.phases[current]
        done, at, total = states[current]
        measured = phase.measured_in is not None
        where = f"{head}, phase {current + 1}/{len(self.phases)} {phase.name}"
        if not phase.unit:  # nothing to count: it is under way, or done
            return f"{where}: {'done' if total and done >= total else 'under way'}"
        # The rate counts from the first look that saw the phase move: waiting for its input (a shuffle)
        # before its first unit is no part of how fast it goes.
        first = self._seen.setdefault(phase.name, (now, at)) if at else (now, at)
        parts = [f"{done:,} {phase.unit}" + (f" of {total:,}" if total is not None and not measured else "")]
        if total is not None and measured:
            parts[0] += f", {_amount(at, phase.measured_in)} of {_amount(total, phase.measured_in)}"
        if total:
            parts[0] += f" ({min(100.0, 100.0 * at / total):.1f}%)"
        elapsed = now - first[0]
        rate = (at - first[1]) / elapsed if elapsed > 0 else 0.0
        if elapsed > 0:
            unit_rate = rate if not measured else rate * (done / at if at else 0.0)
            parts.append(f"{unit_rate:,.1f} {phase.unit}/s")
        if total and at >= total:
            parts.append("finishing")  # all of it done: what is left is the step's own end
        elif total and rate > 0:
            parts.append(f"ETA {_duration((total - at) / rate)}")
        return f"{where}: {', '.join(parts)}"

    @staticmethod
    def _state(phase: Phase, found: dict[str, dict[str, int]]) -> tuple[int, int, int | None]:
        """(units done, progress in the total's measure, total or None) of one phase."""
        tally = found.get(phase.name, {})
        done = tally.get("done", 0)
        total = tally.get("total", phase.total)
        if total is None and phase.total_of is not None:
            total = found.get(phase.total_of, {}).get("done")
        at = tally.get("measured", 0) if phase.measured_in is not None else done
        return done, at, total


def _complete(state: tuple[int, int, int | None]) -> bool:
    _, at, total = state
    return total is not None and at >= total

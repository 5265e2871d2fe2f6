"""Progress, worker side: what each step has done so far, published for the launcher's progress line.

A job's steps count their work in a Tally (documents read, images encoded, records written, ...), one
per phase; the launcher (dew.pipelines.progress_line) sums every worker's tallies into one line every
few seconds, with the phase's total when one is known (announce_total), its rate, percent and ETA.
Tallies travel as small JSON files in the directory the launcher names in DEW_PROGRESS, rewritten at
most once a second each: local workers are processes of the launcher's machine, whatever the runner
forks or spawns. Where DEW_PROGRESS is unset (a worker on Dataflow, a step run on its own) a Tally
only counts, and Beam's counters are the progress there.

A phase's `done` counts its units (what the line names: documents, images, clips); `measured`, when a
phase is measured in something else that its total is known in (input bytes, for a reader of files
of unknown row counts), drives its percent and ETA instead.
"""

from __future__ import annotations

import dataclasses
import json
import os
import threading
import time
from collections.abc import Callable, Mapping
from typing import Any

ENV = "DEW_PROGRESS"
PUBLISH_SECONDS = 1.0
_counter = iter(range(1 << 62))
_counter_lock = threading.Lock()


@dataclasses.dataclass(frozen=True, kw_only=True)
class Phase:
    """One phase of a job, as its progress line shows it: the tally name its steps count under, the units
    shown (none: a phase with nothing to count, such as the commit), the total when the launcher knows
    it, and `measured_in`, the measure of that total when it is not the units ("bytes")."""

    name: str
    unit: str = ""
    total: int | None = None
    measured_in: str | None = None
    # The phase whose units done are this one's total (documents tokenized of those read), when none is set.
    total_of: str | None = None


def _directory() -> str | None:
    where = os.environ.get(ENV)
    return where if where and os.path.isdir(where) else None


def _write(directory: str, name: str, value: Mapping[str, Any]) -> None:
    """Replaces `name` in `directory` whole: a reader sees the old tally or the new, never half of one."""
    path = os.path.join(directory, name)
    part = f"{path}.{os.getpid()}.{threading.get_ident()}.part"
    try:
        with open(part, "w") as f:
            json.dump(value, f)
        os.replace(part, path)
    except OSError:
        pass  # the launcher finished and removed the directory: nobody is left to show it to


class Tally:
    """One step's count on this worker. `measure`, when given, says how far the step is in the unit its
    phase's total is measured in (input bytes read, say), asked only when the tally is published."""

    def __init__(self, phase: str, *, measure: Callable[[], int] | None = None) -> None:
        self.phase = phase
        self.done = 0
        self.measure = measure
        with _counter_lock:
            self._name = f"{phase}.{os.getpid()}.{next(_counter)}.json"
        self._last = 0.0

    def add(self, count: int = 1) -> None:
        self.done += count
        now = time.monotonic()
        if now - self._last >= PUBLISH_SECONDS:
            self._last = now
            self.publish()

    def publish(self) -> None:
        """Writes the tally out now (a step calls it when a bundle ends, so the launcher sees the last count)."""
        directory = _directory()
        if directory is None:
            return
        value: dict[str, Any] = {"phase": self.phase, "done": self.done}
        if self.measure is not None:
            value["measured"] = int(self.measure())
        _write(directory, self._name, value)


def announce_total(phase: str, total: int) -> None:
    """Tells the launcher how much `phase` will do in all, once a step has learnt it (a shard plan, say)."""
    directory = _directory()
    if directory is not None:
        _write(directory, f"{phase}.total.json", {"phase": phase, "total": int(total)})


def read_all(directory: str) -> dict[str, dict[str, int]]:
    """{phase: {"done", "measured" (when any tally measures), "total" (when announced)}} summed over tallies."""
    phases: dict[str, dict[str, int]] = {}
    try:
        names = os.listdir(directory)
    except OSError:
        return phases
    for name in names:
        if not name.endswith(".json"):
            continue
        try:
            with open(os.path.join(directory, name)) as f:
                value = json.load(f)
        except (OSError, ValueError):
            continue  # replaced as it was read: the next look sees it
        entry = phases.setdefault(value["phase"], {"done": 0})
        if "total" in value:
            entry["total"] = value["total"]
        else:
            entry["done"] += value.get("done", 0)
            if "measured" in value:
                entry["measured"] = entry.get("measured", 0) + value["measured"]
    return phases

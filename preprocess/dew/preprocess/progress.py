"""A worker's progress line every few seconds, so a long local run shows it is alive and how fast it goes."""

from __future__ import annotations

import logging
import time

PROGRESS_SECONDS = 10.0
_log = logging.getLogger("dew.preprocess")


class Progress:
    """Counts what one worker did and logs `<job>: N <unit> (R/s) on this worker` at most every few seconds."""

    def __init__(self, job: str, unit: str, every: float = PROGRESS_SECONDS) -> None:
        self.job, self.unit, self.every = job, unit, every
        self.start = self.last = time.monotonic()
        self.count = 0

    def add(self, count: int = 1) -> None:
        self.count += count
        now = time.monotonic()
        if now - self.last >= self.every:
            self.last = now
            rate = self.count / max(now - self.start, 1e-9)
            _log.warning("%s: %d %s (%.0f/s) on this worker", self.job, self.count, self.unit, rate)

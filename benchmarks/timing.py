"""Timing helpers shared by the benchmarks (not a benchmark itself: `make bench` runs bench_*.py)."""

from __future__ import annotations

import time
from collections.abc import Callable


def rate(fn: Callable[[], object], count: int, seconds: float = 3.0) -> float:
    """Items per second of fn(), which handles `count` items, repeated for about `seconds` after one warm-up."""
    fn()
    calls, start = 0, time.perf_counter()
    while time.perf_counter() - start < seconds:
        fn()
        calls += 1
    return calls * count / (time.perf_counter() - start)

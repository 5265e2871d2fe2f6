"""One retry policy for every request dew makes to object storage or the web, and one Retry-After reader.

A failed attempt that another attempt may not meet (throttling, a server error, a dropped connection, a
short or corrupted body) raises Transient; `retrying` calls the attempt again, after exponential backoff
with full jitter, or after the server's own Retry-After, for at most $DEW_GCS_RETRY_SECONDS (default
300) in all. Full jitter keeps the worker processes of many hosts from retrying in step after a shared
outage, and a Retry-After longer than what is left of the budget ends the retries at once instead of
sleeping into a certain failure.
"""

from __future__ import annotations

import email.utils
import os
import random
import threading
import time
from collections.abc import Callable
from typing import TypeVar

from dew.data import readahead

_T = TypeVar("_T")
_BUDGET = threading.local()  # the deadline of the `retrying` running in this thread, if any
DEFAULT_RETRY_SECONDS = 300.0
FIRST_DELAY = 0.25
MAX_DELAY = 30.0


def retry_seconds() -> float:
    """The seconds a read may spend retrying in all: $DEW_GCS_RETRY_SECONDS, 300 by default."""
    return float(os.environ.get("DEW_GCS_RETRY_SECONDS", DEFAULT_RETRY_SECONDS))


class Transient(Exception):
    """A failure that another attempt may not meet; `retry_after` is the server's own wait, if it gave one."""

    def __init__(self, message: str, retry_after: float | None = None) -> None:
        super().__init__(message)
        self.retry_after = retry_after


def retry_after(value: str | None) -> float | None:
    """The seconds a Retry-After header asks for (whole seconds, or an HTTP date), None where it asks for
    none a client can read: a hostile value is no wait rather than an error."""
    if not value:
        return None
    if value.strip().isascii() and value.strip().isdigit():  # "²" is a digit to str.isdigit, not to float()
        return float(value.strip())
    try:
        when = email.utils.parsedate_to_datetime(value)
    except (TypeError, ValueError, IndexError, OverflowError):
        return None
    return max(0.0, when.timestamp() - time.time())


def time_left() -> float | None:
    """Seconds left of the retry budget of the `retrying` running in this thread (None outside one): an
    attempt that reads a body bounds its wait by it, so a server that keeps sending a byte now and then
    cannot hold a read past its budget."""
    deadline = getattr(_BUDGET, "deadline", None)
    return None if deadline is None else deadline - time.monotonic()


def retrying(uri: str, attempt: Callable[[], _T]) -> _T:
    """`attempt()`, again after each Transient failure, until it succeeds or the retry budget is spent;
    then an OSError naming `uri`, the attempts and the last failure."""
    budget = retry_seconds()
    deadline = time.monotonic() + budget
    outer, _BUDGET.deadline = getattr(_BUDGET, "deadline", None), deadline
    tries = 0
    try:
        while True:
            tries += 1
            try:
                return attempt()
            except Transient as error:
                if error.retry_after is not None:
                    delay = error.retry_after
                else:
                    delay = random.uniform(0, min(MAX_DELAY, FIRST_DELAY * 2 ** (tries - 1)))
                if time.monotonic() + delay > deadline:
                    raise OSError(
                        f"{uri}: still failing after {tries} attempts within {budget:g} s (DEW_GCS_RETRY_SECONDS): "
                        f"{error}"
                    ) from error
                readahead.pause(delay, time.sleep)  # a close of the stream this read is for ends the wait: Cancelled
    finally:
        _BUDGET.deadline = outer

"""Mistakes of the user's, and keeping a Beam worker from printing their tracebacks.

A user error raised on a Beam worker (a --strict failure, a job that would commit too little) is
reported by the launcher as one line (dew.pipelines.cli). But the local runner's worker processes also
print the whole traceback of any failed step to the stderr they share with the launcher, before the
launcher has said anything, which buries the one line under sixty. So a user error is raised through
`user_error`, which first makes this worker's stderr drop traceback text that ends in one of these
errors. Everything else still prints, and DEW_VERBOSE=1 (what --verbose sets) prints all of it.
"""

from __future__ import annotations

import os
import sys
from typing import Any, TypeVar

# By qualified name: the launcher also recognises them in the text a worker relays.
USER_ERRORS = (
    "dew.data.formats.WrongKindError",
    "dew.data.remote.DamagedError",
    "dew.preprocess.cleaning.components.NotConvergedError",
    "dew.preprocess.commit.OutputConflictError",
    "dew.preprocess.documents.BadInputError",
    "dew.preprocess.drops.TooManyDropsError",
    "dew.preprocess.shards.TooManyShardsError",
)
VERBOSE = "DEW_VERBOSE"
_TRACEBACK = "Traceback (most recent call last):"

Error = TypeVar("Error", bound=BaseException)


class _QuietUserTracebacks:
    """A text stream that passes everything on except a traceback naming a user error.

    Beam's worker prints a failed step's traceback with one print(): the whole text in one write,
    then the newline in another, so a write is either all of a traceback or none of it.
    """

    def __init__(self, stream: Any) -> None:
        self._stream = stream
        self._dropped = False

    def write(self, text: str) -> int:
        if text.startswith(_TRACEBACK) and any(name in text for name in USER_ERRORS):
            self._dropped = True
            return len(text)
        if self._dropped and text == "\n":
            self._dropped = False
            return len(text)
        self._dropped = False
        return self._stream.write(text)

    def __getattr__(self, name: str) -> Any:
        return getattr(self._stream, name)


def user_error(error: Error) -> Error:
    """`error`, to be raised; first keeps this process's stderr from printing its traceback."""
    if not os.environ.get(VERBOSE) and not isinstance(sys.stderr, _QuietUserTracebacks):
        sys.stderr = _QuietUserTracebacks(sys.stderr)
    return error

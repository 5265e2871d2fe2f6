"""Lets dew's own worker logs (a job's images/s, documents/s, ...) through Beam's local runner.

Under `direct_running_mode=multi_processing`, the default for a local run, each worker process sends
its log records to the launcher, which logs every one of them again through one Beam logger as
`"Worker: <the whole LogEntry protobuf on one line>"`. The launcher silences Beam's loggers, since
they are mostly start-up noise and a failed worker's traceback, so the progress lines the jobs log
every few seconds never showed. This filter keeps, of those re-logged records, only the ones a dew
module wrote, and shows them as their own message.
"""

from __future__ import annotations

import logging
import os
from typing import Any

# The logger Beam's local job service re-logs worker records through (apache_beam's own __name__ there).
WORKER_LOGGER = "apache_beam.runners.portability.local_job_service"
_DEW_SOURCES = tuple(os.sep + os.path.join("dew", part) + os.sep for part in ("preprocess", "pipelines", "data"))


class DewWorkerRecords(logging.Filter):
    """Passes a re-logged worker record only when a dew module logged it, rewritten to its message."""

    def filter(self, record: logging.LogRecord) -> bool:
        entry = _entry(record)
        if entry is None or not _from_dew(entry.log_location):
            return False
        record.name, record.msg, record.args = "dew worker", entry.message, ()
        return True


def route_worker_logs(*, verbose: bool) -> None:
    """Quiet: the launcher's log shows, of Beam's re-logged worker records, dew's at WARNING and above.
    Verbose: every one of them, as Beam logs it."""
    logger = logging.getLogger(WORKER_LOGGER)
    for old in [f for f in logger.filters if isinstance(f, DewWorkerRecords)]:
        logger.removeFilter(old)
    if verbose:
        logger.setLevel(logging.NOTSET)
        return
    logger.addFilter(DewWorkerRecords())
    logger.setLevel(logging.WARNING)


def _from_dew(location: str) -> bool:
    # log_location is "<file>:<line>"; a record is dew's when its file lies in a dew package.
    path = location.rpartition(":")[0]
    return any(part in path for part in _DEW_SOURCES)


def _entry(record: logging.LogRecord) -> Any:
    """The worker's LogEntry, parsed back from the one-line text Beam re-logged it as; None if it is not one."""
    if not (isinstance(record.args, tuple) and len(record.args) == 1 and isinstance(record.args[0], str)):
        return None
    from apache_beam.portability.api import beam_fn_api_pb2
    from google.protobuf import text_format

    try:
        return text_format.Parse(record.args[0], beam_fn_api_pb2.LogEntry())
    except text_format.ParseError:
        return None

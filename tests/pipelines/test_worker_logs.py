"""A local multi-process run's worker logs: dew's progress lines reach the launcher's log, Beam's noise does not."""

from __future__ import annotations

import logging

import pytest
from apache_beam.portability.api import beam_fn_api_pb2

from dew.pipelines import common, worker_logs


def relog(message: str, location: str) -> None:
    """What Beam's local job service does with a record a worker process sends it."""
    entry = beam_fn_api_pb2.LogEntry(
        severity=beam_fn_api_pb2.LogEntry.Severity.WARN, message=message, log_location=location
    )
    logging.getLogger(worker_logs.WORKER_LOGGER).log(logging.WARNING, "Worker: %s", str(entry).replace("\n", " "))


def test_dew_worker_progress_is_shown_and_beam_worker_noise_is_not(caplog: pytest.LogCaptureFixture) -> None:
    common.configure_logging(verbose=False)
    with caplog.at_level(logging.WARNING):
        relog("images: 240 (12.5/s) on this worker", "/srv/dew/preprocess/images.py:149")
        relog("No semi_persistent_directory found", "/venv/apache_beam/runners/worker/sdk_worker_main.py:421")
        relog('a "quoted" caption é', "/srv/dew/preprocess/captions.py:12")
    assert [(r.name, r.getMessage()) for r in caplog.records] == [
        ("dew worker", "images: 240 (12.5/s) on this worker"),
        ("dew worker", 'a "quoted" caption é'),
    ]


def test_verbose_shows_every_worker_record_as_beam_logs_it(caplog: pytest.LogCaptureFixture) -> None:
    common.configure_logging(verbose=False)
    common.configure_logging(verbose=True)
    with caplog.at_level(logging.WARNING):
        relog("No semi_persistent_directory found", "/venv/apache_beam/runners/worker/sdk_worker_main.py:421")
    assert len(caplog.records) == 1 and "semi_persistent_directory" in caplog.records[0].getMessage()
    common.configure_logging(verbose=False)

"""The tokenize job writing gs:// through a proxy that throttles, fails and cuts off GCS answers."""

from __future__ import annotations

from pathlib import Path

import pytest

from dew.pipelines import tokenize_job as job
from tests.gcs_faults import Fault, FaultProxy

pytestmark = [pytest.mark.gcs, pytest.mark.beam, pytest.mark.slow]
IN_MEMORY = ["--direct_running_mode=in_memory", "--direct_num_workers=1"]
FLAGS = ("--pack", "--num_shards", "2", "--format", "array_record", "--seq_len", "40", "--val_fraction", "0.1")


def _committed(prefix: str) -> dict[str, bytes]:
    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("dew-test")
    return {b.name[len(prefix) :]: b.download_as_bytes() for b in bucket.list_blobs(prefix=prefix)}


def test_a_gs_job_under_faults_commits_the_same_bytes(text_inputs: Path, gcs_faults: FaultProxy) -> None:
    from google.cloud import storage

    bucket = storage.Client.create_anonymous_client().bucket("dew-test")
    for path in sorted(text_inputs.iterdir()):
        bucket.blob(f"faults-in/{path.name}").upload_from_filename(str(path))
    run = ["--input", "gs://dew-test/faults-in/*", *FLAGS, *IN_MEMORY, "--no_auth"]
    job.main([*run, "--output", "gs://dew-test/faults-clean"])
    clean = _committed("faults-clean/")
    # Every kind of fault, on each kind of request the job makes: listing, metadata, reads, uploads, batches.
    gcs_faults.inject(
        Fault("429", method="GET", path=r"/o\?.*prefix=faults-in", retry_after="1"),
        Fault("503", method="GET", path=r"/o/faults-in%2F[^?]*\?", times=2),
        Fault("reset", method="GET", path=r"faults-in.*alt=media", times=2),
        Fault("truncate", method="GET", path=r"faults-in.*alt=media"),
        Fault("slow", method="GET", path=r"faults-in.*alt=media"),
        Fault("503", method="POST", path=r"uploadType=resumable$", times=2),
        Fault("429", method="PUT", path=r"upload_id=", retry_after="1", times=2),
        Fault("503", method="POST", path=r"/batch/storage/v1"),
    )
    job.main([*run, "--output", "gs://dew-test/faults-out"])
    assert not gcs_faults.pending(), "a scheduled fault never met its request"
    faulted = _committed("faults-out/")
    assert faulted.keys() == clean.keys()
    for name, data in clean.items():
        assert faulted[name] == data, name

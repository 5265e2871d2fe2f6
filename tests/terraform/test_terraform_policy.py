"""The promises the modules make about data safety and least privilege, pinned against edits.

checkov covers generic hygiene; these cover what is particular to dew: which bucket is versioned,
what expires, and exactly what the worker identity may touch.
"""

from __future__ import annotations

from pathlib import Path

import pytest


@pytest.fixture(scope="module")
def buckets(terraform_dir: Path, tf):
    return tf(terraform_dir / "modules" / "buckets")


@pytest.fixture(scope="module")
def dataflow(terraform_dir: Path, tf):
    return tf(terraform_dir / "modules" / "dataflow")


def _one(blocks: list[dict] | dict) -> dict:
    return blocks[0] if isinstance(blocks, list) else blocks


def test_every_bucket_is_private_labelled_and_placed_by_variable(buckets) -> None:
    all_buckets = buckets.resources_of_type("google_storage_bucket")
    assert {"raw", "processed", "dataflow", "access_logs"} <= set(all_buckets)
    for name, bucket in all_buckets.items():
        assert bucket["uniform_bucket_level_access"] is True, name
        assert bucket["public_access_prevention"] == "enforced", name
        assert bucket["location"] == "${var.location}", name
        assert "local.labels" in bucket["labels"], name
        assert bucket["project"] == "${var.project_id}", name


def test_data_buckets_are_versioned_and_prune_old_versions(buckets) -> None:
    for name in ("raw", "processed"):
        bucket = buckets.resources_of_type("google_storage_bucket")[name]
        assert _one(bucket["versioning"])["enabled"] is True, name
        conditions = [_one(rule["condition"]) for rule in bucket["lifecycle_rule"]]
        assert {"days_since_noncurrent_time": "${var.noncurrent_version_age_days}"} in conditions, name


def test_only_temporary_objects_expire(buckets) -> None:
    bucket = buckets.resources_of_type("google_storage_bucket")["dataflow"]
    (rule,) = bucket["lifecycle_rule"]
    condition = _one(rule["condition"])
    assert _one(rule["action"])["type"] == "Delete"
    assert condition["age"] == "${var.temp_object_age_days}"
    # templates/ must survive: flex-template specs are launched long after they are built.
    assert sorted(condition["matches_prefix"]) == ["staging/", "temp/"]


def test_scratch_space_keeps_no_soft_deleted_copies(buckets) -> None:
    """Every Dataflow job writes and deletes its temp/ and staging/ files; under the 7-day soft-delete
    policy a new bucket gets by default, each deleted file is billed for a week more, and Beam warns
    about it at every launch. The data buckets keep the default: there it guards against a stray delete."""
    bucket = buckets.resources_of_type("google_storage_bucket")["dataflow"]
    assert _one(bucket["soft_delete_policy"])["retention_duration_seconds"] == 0
    for name in ("raw", "processed"):
        assert "soft_delete_policy" not in buckets.resources_of_type("google_storage_bucket")[name], name
    (constraint,) = [
        spec["version"]
        for block in buckets.terraform
        for providers in block.get("required_providers", [])
        for name, spec in providers.items()
        if name == "google"
    ]
    # soft_delete_policy came with google provider 5.22; an older one would refuse the block at plan time.
    assert ">= 5.22" in constraint, constraint


def test_data_buckets_log_access_elsewhere(buckets) -> None:
    for name in ("raw", "processed", "dataflow"):
        logging = _one(buckets.resources_of_type("google_storage_bucket")[name]["logging"])
        assert logging["log_bucket"] == "${google_storage_bucket.access_logs.name}", name


def test_training_readers_get_read_only_access_to_processed(buckets) -> None:
    grant = buckets.resources_of_type("google_storage_bucket_iam_member")["processed_reader"]
    assert grant["bucket"] == "${google_storage_bucket.processed.name}"
    assert grant["role"] == "roles/storage.objectViewer"
    assert grant["for_each"] == "${toset(var.processed_readers)}"


def test_worker_holds_one_project_role(dataflow) -> None:
    project_grants = dataflow.resources_of_type("google_project_iam_member")
    assert [g["role"] for g in project_grants.values()] == ["roles/dataflow.worker"]
    for kind in ("google_project_iam_binding", "google_project_iam_policy"):
        assert not dataflow.resources_of_type(kind), f"{kind} would be authoritative over the whole project"


def test_worker_object_access_is_per_bucket(dataflow) -> None:
    grants = {g["bucket"]: g["role"] for g in dataflow.resources_of_type("google_storage_bucket_iam_member").values()}
    assert grants == {
        "${var.raw_bucket}": "roles/storage.objectViewer",  # inputs are never written
        "${var.processed_bucket}": "roles/storage.objectUser",
        "${var.dataflow_bucket}": "roles/storage.objectUser",
    }


def test_worker_only_reads_the_registry(dataflow) -> None:
    (grant,) = dataflow.resources_of_type("google_artifact_registry_repository_iam_member").values()
    assert grant["role"] == "roles/artifactregistry.reader"
    assert grant["repository"] == "${var.registry_repository_id}"


def test_every_grant_in_the_dataflow_module_is_to_its_worker(dataflow) -> None:
    grants = {k: v for k, v in dataflow.resources.items() if "_iam_" in k.split(".")[0]}
    assert grants
    for address, grant in grants.items():
        assert grant["member"] == "${google_service_account.worker.member}", address


def test_dataflow_apis_are_enabled_without_disabling_on_destroy(dataflow) -> None:
    services = dataflow.locals["services"]
    for api in ("dataflow.googleapis.com", "compute.googleapis.com"):
        assert api in services
    (service,) = dataflow.resources_of_type("google_project_service").values()
    assert service["disable_on_destroy"] is False

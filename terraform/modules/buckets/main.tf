locals {
  labels = merge(var.labels, { app = "dew" })
}

resource "google_project_service" "storage" {
  project = var.project_id
  service = "storage.googleapis.com"
  # Other workloads in the project use Cloud Storage too; destroying these buckets must not turn it off.
  disable_on_destroy = false
}

# Usage logs of the data buckets, so reads and writes of the corpora can be audited per object.
resource "google_storage_bucket" "access_logs" {
  #checkov:skip=CKV_GCP_62:This bucket is the access-log sink; logging its own access would log the log writes.
  #checkov:skip=CKV_GCP_78:Log objects are written once and expire by age; versions would only keep expired logs.
  project                     = var.project_id
  name                        = "${var.name_prefix}-access-logs"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = merge(local.labels, { dew_bucket = "access-logs" })

  lifecycle_rule {
    condition {
      age = var.access_log_age_days
    }
    action {
      type = "Delete"
    }
  }

  depends_on = [google_project_service.storage]
}

# Cloud Storage delivers usage logs as this Google group; it needs nothing beyond creating objects.
resource "google_storage_bucket_iam_member" "access_log_writer" {
  bucket = google_storage_bucket.access_logs.name
  role   = "roles/storage.objectCreator"
  member = "group:cloud-storage-analytics@google.com"
}

# Source corpora as downloaded. Versioned because a corpus is often costly or impossible to fetch again.
resource "google_storage_bucket" "raw" {
  project                     = var.project_id
  name                        = "${var.name_prefix}-raw"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = merge(local.labels, { dew_bucket = "raw" })

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_age_days
    }
    action {
      type = "Delete"
    }
  }

  logging {
    log_bucket        = google_storage_bucket.access_logs.name
    log_object_prefix = "raw/"
  }
}

# Committed shard directories that training runs read. Versioned so that an overwriting rerun or a
# stray delete can be undone while a run still depends on the old shards.
resource "google_storage_bucket" "processed" {
  project                     = var.project_id
  name                        = "${var.name_prefix}-processed"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = merge(local.labels, { dew_bucket = "processed" })

  versioning {
    enabled = true
  }

  lifecycle_rule {
    condition {
      days_since_noncurrent_time = var.noncurrent_version_age_days
    }
    action {
      type = "Delete"
    }
  }

  logging {
    log_bucket        = google_storage_bucket.access_logs.name
    log_object_prefix = "processed/"
  }
}

resource "google_storage_bucket_iam_member" "processed_reader" {
  for_each = toset(var.processed_readers)

  bucket = google_storage_bucket.processed.name
  role   = "roles/storage.objectViewer"
  member = each.value
}

# Dataflow's temp/ and staging/ locations, and templates/ for flex-template specs. Only temp/ and
# staging/ expire: a template spec must outlive the jobs launched from it.
resource "google_storage_bucket" "dataflow" {
  #checkov:skip=CKV_GCP_78:Scratch space rewritten by every job; versions would keep every temporary file.
  project                     = var.project_id
  name                        = "${var.name_prefix}-dataflow"
  location                    = var.location
  storage_class               = "STANDARD"
  uniform_bucket_level_access = true
  public_access_prevention    = "enforced"
  labels                      = merge(local.labels, { dew_bucket = "dataflow" })

  # Every job writes and deletes its temp/ and staging/ files; the default 7-day soft delete would
  # bill each deleted one for another week (Beam warns about it at launch). Scratch needs no undelete.
  soft_delete_policy {
    retention_duration_seconds = 0
  }

  lifecycle_rule {
    condition {
      age            = var.temp_object_age_days
      matches_prefix = ["temp/", "staging/"]
    }
    action {
      type = "Delete"
    }
  }

  logging {
    log_bucket        = google_storage_bucket.access_logs.name
    log_object_prefix = "dataflow/"
  }
}

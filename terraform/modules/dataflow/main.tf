# What a Dataflow job needs switched on besides Cloud Storage and Artifact Registry, which the buckets
# and registry modules enable beside their own resources.
locals {
  services = toset([
    "dataflow.googleapis.com",
    "compute.googleapis.com", # workers are Compute Engine VMs
    "logging.googleapis.com", # worker and launcher logs
    "iam.googleapis.com",     # the worker service account below
  ])
}

resource "google_project_service" "this" {
  for_each = local.services

  project = var.project_id
  service = each.value
  # Other workloads in the project may rely on these APIs; destroying the workers must not turn them off.
  disable_on_destroy = false
}

# A dedicated identity instead of the Compute Engine default account, which holds Editor on the project.
resource "google_service_account" "worker" {
  project      = var.project_id
  account_id   = var.account_id
  display_name = "dew Dataflow worker"
  description  = "Runs dew preprocessing jobs: Dataflow worker, reads raw corpora, writes processed shards."

  depends_on = [google_project_service.this]
}

# The one project-level grant: Dataflow only accepts roles/dataflow.worker there. It lets the VMs lease
# and report work items, write logs and metrics; it is also what a flex-template launcher needs to submit
# the job it builds.
resource "google_project_iam_member" "worker" {
  project = var.project_id
  role    = "roles/dataflow.worker"
  member  = google_service_account.worker.member
}

# Object access on this deployment's buckets only, never project-wide storage roles.
resource "google_storage_bucket_iam_member" "raw_reader" {
  bucket = var.raw_bucket
  role   = "roles/storage.objectViewer"
  member = google_service_account.worker.member
}

# objectUser rather than objectCreator: committing a shard renames a temporary object (copy, then
# delete), and a rerun deletes stale shards.
resource "google_storage_bucket_iam_member" "processed_writer" {
  bucket = var.processed_bucket
  role   = "roles/storage.objectUser"
  member = google_service_account.worker.member
}

resource "google_storage_bucket_iam_member" "dataflow_user" {
  bucket = var.dataflow_bucket
  role   = "roles/storage.objectUser"
  member = google_service_account.worker.member
}

# Workers and the flex-template launcher VM pull the pipeline image as this account.
resource "google_artifact_registry_repository_iam_member" "image_reader" {
  project    = var.project_id
  location   = var.registry_location
  repository = var.registry_repository_id
  role       = "roles/artifactregistry.reader"
  member     = google_service_account.worker.member
}

resource "google_project_service" "artifactregistry" {
  project = var.project_id
  service = "artifactregistry.googleapis.com"
  # Other repositories in the project may live on; destroying this one must not turn the API off.
  disable_on_destroy = false
}

# Holds the flex-template image, which is both the launcher and the worker container.
resource "google_artifact_registry_repository" "images" {
  #checkov:skip=CKV_GCP_84:The image holds only open-source code and packages, encrypted at rest with Google-managed keys; a KMS key would add a key ring to own and rotate and protect nothing secret.
  project       = var.project_id
  location      = var.location
  repository_id = var.repository_id
  format        = "DOCKER"
  description   = "dew pipeline images: Dataflow flex-template launcher and worker."
  labels        = merge(var.labels, { app = "dew" })

  docker_config {
    # A job records the image tag it ran with; a tag that could be pushed again would make the same
    # tag mean different code, and a rerun of an old job unreproducible.
    immutable_tags = true
  }

  depends_on = [google_project_service.artifactregistry]
}

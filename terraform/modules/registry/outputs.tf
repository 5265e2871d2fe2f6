output "repository_id" {
  description = "Id of the Docker repository."
  value       = google_artifact_registry_repository.images.repository_id
}

output "location" {
  description = "Location of the Docker repository."
  value       = google_artifact_registry_repository.images.location
}

output "repository_url" {
  description = "Docker host and path of the repository: <location>-docker.pkg.dev/<project_id>/<repository_id>."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}"
}

output "image" {
  description = "URI of the pipeline image without a tag; append :<tag> (or @sha256:<digest>) to name one build."
  value       = "${google_artifact_registry_repository.images.location}-docker.pkg.dev/${var.project_id}/${google_artifact_registry_repository.images.repository_id}/${var.image_name}"
}

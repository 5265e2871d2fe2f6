output "raw_bucket" {
  description = "Name of the bucket holding source corpora."
  value       = google_storage_bucket.raw.name
}

output "processed_bucket" {
  description = "Name of the bucket holding committed shard directories for training."
  value       = google_storage_bucket.processed.name
}

output "dataflow_bucket" {
  description = "Name of the bucket holding Dataflow temp/, staging/ and templates/."
  value       = google_storage_bucket.dataflow.name
}

output "access_log_bucket" {
  description = "Name of the bucket receiving the usage logs of the other three."
  value       = google_storage_bucket.access_logs.name
}

output "temp_location" {
  description = "Beam --temp_location: gs:// URL of temp/ in the Dataflow bucket."
  value       = "${google_storage_bucket.dataflow.url}/temp"
}

output "staging_location" {
  description = "Beam --staging_location: gs:// URL of staging/ in the Dataflow bucket."
  value       = "${google_storage_bucket.dataflow.url}/staging"
}

output "templates_location" {
  description = "gs:// URL of templates/ in the Dataflow bucket, where flex-template specs are written; never expires."
  value       = "${google_storage_bucket.dataflow.url}/templates"
}

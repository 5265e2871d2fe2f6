# Named after the Beam pipeline options they fill, so each one reads as the flag it becomes.

output "project" {
  description = "--project"
  value       = var.project_id
}

output "region" {
  description = "--region"
  value       = var.region
}

output "temp_location" {
  description = "--temp_location"
  value       = module.buckets.temp_location
}

output "staging_location" {
  description = "--staging_location"
  value       = module.buckets.staging_location
}

output "service_account_email" {
  description = "--service_account_email"
  value       = module.dataflow.service_account_email
}

output "sdk_container_image" {
  description = "--sdk_container_image: the pipeline image at var.image_tag; push it there before launching."
  value       = "${module.registry.image}:${var.image_tag}"
}

output "dataflow_flags" {
  description = "All of the above as one line of flags to append to a dew-preprocess command."
  value = join(" ", [
    "--runner DataflowRunner",
    "--project ${var.project_id}",
    "--region ${var.region}",
    "--temp_location ${module.buckets.temp_location}",
    "--staging_location ${module.buckets.staging_location}",
    "--service_account_email ${module.dataflow.service_account_email}",
    "--sdk_container_image ${module.registry.image}:${var.image_tag}",
  ])
}

output "raw_bucket" {
  description = "Bucket for source corpora: --input gs://<raw_bucket>/..."
  value       = module.buckets.raw_bucket
}

output "processed_bucket" {
  description = "Bucket for shard directories: --output gs://<processed_bucket>/..., and the path training reads."
  value       = module.buckets.processed_bucket
}

output "templates_location" {
  description = "Where flex-template specs go: gcloud dataflow flex-template build <templates_location>/<name>.json"
  value       = module.buckets.templates_location
}

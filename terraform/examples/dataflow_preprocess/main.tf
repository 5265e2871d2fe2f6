# Everything `dew-preprocess ... --runner DataflowRunner` needs in one project: data buckets, a worker
# identity and the pipeline image's registry. The outputs are its command-line flags.

provider "google" {
  project = var.project_id
  region  = var.region
}

locals {
  name_prefix = coalesce(var.name_prefix, "${var.project_id}-dew")
}

module "buckets" {
  source = "../../modules/buckets"

  project_id                  = var.project_id
  name_prefix                 = local.name_prefix
  location                    = var.region
  temp_object_age_days        = var.temp_object_age_days
  noncurrent_version_age_days = var.noncurrent_version_age_days
  processed_readers           = var.processed_readers
  labels                      = var.labels
}

module "registry" {
  source = "../../modules/registry"

  project_id = var.project_id
  location   = var.region
  labels     = var.labels
}

module "dataflow" {
  source = "../../modules/dataflow"

  project_id             = var.project_id
  raw_bucket             = module.buckets.raw_bucket
  processed_bucket       = module.buckets.processed_bucket
  dataflow_bucket        = module.buckets.dataflow_bucket
  registry_location      = module.registry.location
  registry_repository_id = module.registry.repository_id
}

variable "project_id" {
  type        = string
  description = "Project that runs the Dataflow jobs and owns the worker service account."
}

variable "account_id" {
  type        = string
  description = "Account id of the worker service account; its email is <account_id>@<project_id>.iam.gserviceaccount.com."
  default     = "dew-dataflow-worker"

  validation {
    condition     = can(regex("^[a-z][a-z0-9-]{4,28}[a-z0-9]$", var.account_id))
    error_message = "account_id must be 6-30 lowercase letters, digits or hyphens, starting with a letter."
  }
}

variable "raw_bucket" {
  type        = string
  description = "Name of the bucket of source corpora; the workers may read it."
}

variable "processed_bucket" {
  type        = string
  description = "Name of the bucket the jobs write shard directories to (and read them from, for pack and plan-mixture)."
}

variable "dataflow_bucket" {
  type        = string
  description = "Name of the bucket holding the jobs' temp/, staging/ and templates/."
}

variable "registry_location" {
  type        = string
  description = "Location of the Artifact Registry repository holding the pipeline image."
}

variable "registry_repository_id" {
  type        = string
  description = "Id of the Artifact Registry repository holding the pipeline image; the workers may pull from it."
}

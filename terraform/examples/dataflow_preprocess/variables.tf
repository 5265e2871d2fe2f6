variable "project_id" {
  type        = string
  description = "Project to deploy into: it runs the Dataflow jobs and owns the buckets and the registry."
}

variable "region" {
  type        = string
  description = "Region of the Dataflow jobs, the buckets and the registry; put the TPU VMs that train on the processed bucket here too, to read it without cross-region egress."
  default     = "us-central1"
}

variable "name_prefix" {
  type        = string
  description = "Globally unique prefix of the bucket names; null means \"<project_id>-dew\"."
  default     = null
}

variable "image_tag" {
  type        = string
  description = "Tag of the pipeline image to run, e.g. the git commit it was built from. Tags are immutable in the registry, so a tag names one build; changing it changes only outputs."
}

variable "processed_readers" {
  type        = list(string)
  description = "IAM members that train on the processed data (e.g. serviceAccount:<TPU VM account>), granted read access to the processed bucket."
  default     = []
}

variable "labels" {
  type        = map(string)
  description = "Labels added to the buckets and the registry, e.g. { team = \"pretraining\" }."
  default     = {}
}

variable "temp_object_age_days" {
  type        = number
  description = "Days after which Dataflow's temp/ and staging/ files are deleted; keep it above the longest job, since workers added by autoscaling read the staged files."
  default     = 7
}

variable "noncurrent_version_age_days" {
  type        = number
  description = "Days a replaced or deleted object of the raw and processed buckets stays recoverable."
  default     = 30
}

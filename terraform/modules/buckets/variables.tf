variable "project_id" {
  type        = string
  description = "Project that owns the buckets."
}

variable "name_prefix" {
  type        = string
  description = "Globally unique prefix of the bucket names: <prefix>-raw, -processed, -dataflow and -access-logs. Lowercase letters, digits and hyphens."

  validation {
    # The longest suffix is "-access-logs" (12 characters) and a bucket name is at most 63.
    condition     = can(regex("^[a-z0-9][a-z0-9-]{1,49}[a-z0-9]$", var.name_prefix)) && !startswith(var.name_prefix, "goog")
    error_message = "name_prefix must be 3-51 lowercase letters, digits or hyphens, start and end with a letter or digit, and not start with \"goog\"."
  }
}

variable "location" {
  type        = string
  description = "Location of every bucket: a region (e.g. us-central1) to sit beside the Dataflow workers and TPU VMs, or a multi-region (e.g. US) when training runs in several regions."
}

variable "temp_object_age_days" {
  type        = number
  description = "Days after which objects under temp/ and staging/ in the Dataflow bucket are deleted. Must exceed the longest job: workers started by autoscaling read the staged files."
  default     = 7

  validation {
    condition     = var.temp_object_age_days >= 1 && floor(var.temp_object_age_days) == var.temp_object_age_days
    error_message = "temp_object_age_days must be a whole number of days, at least 1."
  }
}

variable "noncurrent_version_age_days" {
  type        = number
  description = "Days a replaced or deleted object version is kept in the raw and processed buckets before it is deleted for good."
  default     = 30

  validation {
    condition     = var.noncurrent_version_age_days >= 1 && floor(var.noncurrent_version_age_days) == var.noncurrent_version_age_days
    error_message = "noncurrent_version_age_days must be a whole number of days, at least 1."
  }
}

variable "access_log_age_days" {
  type        = number
  description = "Days the access logs of the data buckets are kept."
  default     = 365

  validation {
    condition     = var.access_log_age_days >= 1 && floor(var.access_log_age_days) == var.access_log_age_days
    error_message = "access_log_age_days must be a whole number of days, at least 1."
  }
}

variable "processed_readers" {
  type        = list(string)
  description = "IAM members (e.g. serviceAccount:tpu-vm@P.iam.gserviceaccount.com) granted read access to the processed bucket, for the training runs that load it."
  default     = []

  validation {
    condition     = alltrue([for m in var.processed_readers : !contains(["allUsers", "allAuthenticatedUsers"], m)])
    error_message = "processed_readers must name principals; the buckets are never public."
  }
}

variable "labels" {
  type        = map(string)
  description = "Labels added to every bucket, next to app = dew and dew_bucket = <raw|processed|dataflow|access-logs>."
  default     = {}
}

variable "project_id" {
  type        = string
  description = "Project that owns the repository."
}

variable "location" {
  type        = string
  description = "Region (e.g. us-central1) or multi-region (e.g. us) of the repository; the Dataflow region's own is fastest for workers pulling the image."
}

variable "repository_id" {
  type        = string
  description = "Id of the Docker repository; image URIs start with <location>-docker.pkg.dev/<project_id>/<repository_id>."
  default     = "dew"

  validation {
    condition     = can(regex("^[a-z]([a-z0-9-]{0,61}[a-z0-9])?$", var.repository_id))
    error_message = "repository_id must be lowercase letters, digits or hyphens, start with a letter and end with a letter or digit."
  }
}

variable "image_name" {
  type        = string
  description = "Name of the pipeline image inside the repository (launcher and worker in one image)."
  default     = "dew-preprocess"
}

variable "labels" {
  type        = map(string)
  description = "Labels added to the repository, next to app = dew."
  default     = {}
}

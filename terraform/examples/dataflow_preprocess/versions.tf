terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # The range every module under ../../modules accepts.
      version = ">= 5.22, < 7.0"
    }
  }
}

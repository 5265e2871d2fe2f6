terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # One range for every configuration: 5.22 brought the buckets' soft_delete_policy; 7.0, the
      # next major release, may remove or rename arguments, so it must be adopted deliberately.
      version = ">= 5.22, < 7.0"
    }
  }
}

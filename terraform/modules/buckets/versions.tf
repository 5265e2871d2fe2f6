terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # soft_delete_policy arrived in 5.22 and every other argument used here before it; 7.0, the
      # next major release, may remove or rename some of them, so it must be adopted deliberately.
      version = ">= 5.22, < 7.0"
    }
  }
}

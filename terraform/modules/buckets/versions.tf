terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # The arguments used here exist throughout 5.x and 6.x; 7.0, the next major release, may
      # remove or rename some of them, so it must be adopted deliberately.
      version = ">= 5.0, < 7.0"
    }
  }
}

terraform {
  required_version = ">= 1.5"

  required_providers {
    google = {
      source = "hashicorp/google"
      # 5.0 is the first release whose labels and IAM arguments behave the way this module
      # writes them; 7.0 is the next major and may remove or rename arguments used here.
      version = ">= 5.0, < 7.0"
    }
  }
}

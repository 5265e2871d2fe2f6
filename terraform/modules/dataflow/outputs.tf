output "service_account_email" {
  description = "Beam --service_account_email: the worker service account."
  value       = google_service_account.worker.email
}

output "service_account_member" {
  description = "The worker service account as an IAM member (serviceAccount:<email>), for further grants."
  value       = google_service_account.worker.member
}

output "enabled_services" {
  description = "APIs this module enabled for Dataflow."
  value       = sort([for s in google_project_service.this : s.service])
}

"""The test project's own app: job types and the pages that start and show
them, written as docs/install.md and docs/jobs.md tell a project to."""

"""Reads for the import pages."""

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import QuerySet

from demofarm.imports.conf import KIND
from demofarm.imports.models import Upload
from webfarm.progress.api import Job


def imports_of(user: AbstractBaseUser, *, limit: int = 20) -> QuerySet[Job]:
    return Job.objects.filter(owner=user, kind=KIND).order_by("-created_at")[:limit]


def import_of(user: AbstractBaseUser, job_id: str) -> Job | None:
    """The user's import of this id (a URL's <webfarm_job:job_id>), or None."""
    return Job.objects.filter(pk=job_id, owner=user, kind=KIND).first()


def upload_of(job: Job) -> Upload | None:
    upload = job.params.get("upload") if isinstance(job.params, dict) else None
    if not isinstance(upload, int):
        return None
    return Upload.objects.filter(pk=upload, owner_id=job.owner_id).first()

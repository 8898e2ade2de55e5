"""Reads for the report pages."""

from datetime import date

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Max, Min, QuerySet

from progress.ids import is_valid_job_id
from progress.models import Job
from reports.models import Order, ResultFile


def jobs_of(user: AbstractBaseUser, *, limit: int = 50) -> QuerySet[Job]:
    return Job.objects.filter(owner=user).order_by("-created_at")[:limit]


def job_of(user: AbstractBaseUser, job_id: str) -> Job | None:
    if not is_valid_job_id(job_id):
        return None
    return Job.objects.filter(pk=job_id, owner=user).first()


def result_file(job: Job, name: str) -> ResultFile | None:
    if len(name) > 100:
        return None
    return ResultFile.objects.filter(job=job, name=name, complete=True).first()


def order_date_range() -> tuple[date | None, date | None]:
    bounds = Order.objects.aggregate(first=Min("placed_on"), last=Max("placed_on"))
    return bounds["first"], bounds["last"]

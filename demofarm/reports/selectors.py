"""Reads for the report pages."""

from datetime import date
from typing import Any

from django.contrib.auth.models import AbstractBaseUser
from django.db.models import Max, Min, QuerySet

from demofarm.reports.models import Customer, Order, OrderLine, Product, ResultFile
from demofarm.reports.results import RESULT_NAME_RE
from webfarm.core.memo import get_or_set
from webfarm.progress.api import Job

# "My jobs" filters: name -> (label, the states it shows; None: all).
JOB_FILTERS: dict[str, tuple[str, tuple[str, ...] | None]] = {
    "": ("All", None),
    "running": ("Running", ("queued", "running")),
    "finished": ("Finished", ("succeeded",)),
    "failed": ("Failed or cancelled", ("failed", "lost", "cancelled")),
}


def jobs_of(
    user: AbstractBaseUser, *, limit: int = 50, states: tuple[str, ...] | None = None
) -> QuerySet[Job]:
    jobs = Job.objects.filter(owner=user)
    if states is not None:
        jobs = jobs.filter(state__in=states)
    return jobs.order_by("-created_at")[:limit]


def job_of(user: AbstractBaseUser, job_id: str) -> Job | None:
    """The user's job of this id (a URL's <webfarm_job:job_id>), or None."""
    return Job.objects.filter(pk=job_id, owner=user).first()


def result_file(job: Job, name: str) -> ResultFile | None:
    # Only a name a file can have reaches the database (PostgreSQL refuses a NUL byte with an error).
    if not RESULT_NAME_RE.fullmatch(name):
        return None
    return ResultFile.objects.filter(job=job, name=name, complete=True).first()


DATASET_KEY = "reports:dataset"
DATASET_TTL = 300  # seconds


def dataset_summary() -> dict[str, Any]:
    """Counts over the whole shop data (a few table scans on a million orders):
    computed by one process farm-wide every few minutes, and when the data is
    regenerated (generate_orders forgets it)."""

    def compute() -> dict[str, Any]:
        bounds = Order.objects.aggregate(first=Min("placed_on"), last=Max("placed_on"))
        return {
            "orders": Order.objects.count(),
            "lines": OrderLine.objects.count(),
            "customers": Customer.objects.count(),
            "products": Product.objects.count(),
            "first": bounds["first"] and bounds["first"].isoformat(),
            "last": bounds["last"] and bounds["last"].isoformat(),
        }

    return get_or_set(DATASET_KEY, compute, ttl=DATASET_TTL)


def order_date_range() -> tuple[date | None, date | None]:
    summary = dataset_summary()
    return tuple(date.fromisoformat(summary[k]) if summary[k] else None for k in ("first", "last"))

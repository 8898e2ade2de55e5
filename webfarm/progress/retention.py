"""Ended jobs are kept PROGRESS_KEEP_DAYS, then deleted with what hangs on
them (their parts, their result files), a batch at a time: a farm that runs
for months keeps a bounded database however many jobs its users start."""

from datetime import datetime, timedelta

from django.db.models import Q
from django.utils import timezone

from webfarm.progress.conf import get_config
from webfarm.progress.models import Job
from webfarm.progress.states import FINAL_STATES

BATCH = 500


def purge_ended_jobs(*, now: datetime | None = None) -> int:
    """Delete the jobs that ended more than KEEP_DAYS ago; returns how many.
    KEEP_DAYS 0 keeps every job."""
    days = get_config()["KEEP_DAYS"]
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    ended = Job.objects.filter(state__in=FINAL_STATES).filter(
        Q(finished_at__lt=cutoff) | Q(finished_at__isnull=True, created_at__lt=cutoff)
    )
    deleted = 0
    while ids := list(ended.values_list("pk", flat=True)[:BATCH]):
        Job.objects.filter(pk__in=ids).delete()
        deleted += len(ids)
    return deleted

"""Running a customer import: check every row (with progress), then save the
good ones and the rejected ones in one transaction, or nothing."""

from collections.abc import Iterable, Iterator
from datetime import datetime, timedelta
from itertools import islice
from typing import TypeVar

from django.db import transaction
from django.template.defaultfilters import pluralize
from django.utils import timezone

from demofarm.imports.conf import get_config
from demofarm.imports.models import RejectedRow, Upload
from demofarm.imports.rows import BadFile, checked, kept, read
from demofarm.imports.selectors import upload_of
from demofarm.reports.models import Customer
from webfarm.progress.api import Job, JobCancelled, JobFailed, JobResult, Tracker

T = TypeVar("T")


def _batched(items: Iterable[T], n: int) -> Iterator[list[T]]:
    # itertools.batched arrives in Python 3.12.
    iterator = iter(items)
    while part := list(islice(iterator, n)):
        yield part


def run_import(*, job: Job, tracker: Tracker) -> JobResult:
    upload = upload_of(job)
    if upload is None:
        raise JobFailed("The uploaded file is no longer here; please upload it again.")
    if upload.imported_at is not None:
        return _result(upload)  # run again after its worker died past the commit
    try:
        return _import(upload, tracker)
    except (JobCancelled, JobFailed):
        # Nothing was saved and the file is not needed again: free its bytes.
        Upload.objects.filter(pk=upload.pk, imported_at=None).update(data=b"")
        raise


def _import(upload: Upload, tracker: Tracker) -> JobResult:
    reporter = tracker.reporter
    config = get_config()
    try:
        columns, rows = read(bytes(upload.data), max_rows=config["MAX_ROWS"])
    except BadFile as exc:
        raise JobFailed(str(exc)) from exc
    total = len(rows)
    reporter.stage("checking rows", total=total, message=f"checking {total:,} rows")
    good: list[Customer] = []
    bad: list[RejectedRow] = []
    done = 0
    for chunk in _batched(checked(rows, columns, today=timezone.localdate()), config["CHUNK_ROWS"]):
        emails = [fields["email"] for _, _, fields in chunk if isinstance(fields, dict)]
        known = set(Customer.objects.filter(email__in=emails).values_list("email", flat=True))
        for line, cells, fields in chunk:
            if isinstance(fields, dict) and fields["email"] in known:
                fields = f"{fields['email']} is already a customer"
            if isinstance(fields, str):
                bad.append(RejectedRow(upload=upload, line=line, reason=fields[:200], cells=kept(cells)))
            else:
                good.append(Customer(**fields))
        done += len(chunk)
        reporter.update(done, message=f"{done:,} of {total:,} rows checked, {len(bad):,} rejected")

    reporter.stage("saving customers", total=len(good), message=f"saving {len(good):,} customers")
    with transaction.atomic():
        # A cancel while saving raises out of update(): the transaction takes all back.
        RejectedRow.objects.filter(upload=upload).delete()
        RejectedRow.objects.bulk_create(bad, batch_size=500)
        for saved, part in enumerate(_batched(good, 500), 1):
            Customer.objects.bulk_create(part)
            reporter.update(min(saved * 500, len(good)))
        Upload.objects.filter(pk=upload.pk).update(
            imported_at=timezone.now(), imported=len(good), rejected=len(bad), data=b""
        )
    upload.refresh_from_db(fields=["imported", "rejected"])
    return _result(upload)


def _result(upload: Upload) -> JobResult:
    imported, rejected = upload.imported, upload.rejected
    summary = (
        f"{imported:,} customer{pluralize(imported)} imported, {rejected:,} row{pluralize(rejected)} rejected"
    )
    # No link on the bar: the import's own page lists the rejected rows and links their download.
    return JobResult(summary=summary)


def rejected_csv_rows(upload: Upload) -> list[list[str]]:
    """The header and rows of the rejected-rows download."""
    header = ["line", "reason", "name", "email", "region", "joined_on"]
    return [header] + [[str(r.line), r.reason, *r.cells] for r in upload.rejected_rows.all()]


def purge_uploads(*, now: datetime | None = None) -> int:
    """Delete uploads (and their rejected rows) older than KEEP_DAYS; returns how many."""
    days = get_config()["KEEP_DAYS"]
    if not days:
        return 0
    cutoff = (now or timezone.now()) - timedelta(days=days)
    deleted, _ = Upload.objects.filter(created_at__lt=cutoff).delete()
    return deleted

"""The customer import, a job type written against webfarm.progress.api alone."""

from typing import Any

from demofarm.imports import services
from demofarm.imports.conf import KIND
from webfarm.progress.api import Job, JobResult, Tracker, job_type


@job_type(
    KIND,
    title="Customer import",
    noun="import",
    stages=[("checking rows", 90), ("saving customers", 10)],
    time_limit=10 * 60,
    # Safe to run twice: the upload records the commit that saved its customers.
    retry_on_lost=True,
    page="imports:job",
    describe=lambda params: f"Customer import: {params.get('name') or 'a CSV file'}",
)
def import_customers(*, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
    """Check each row of an uploaded CSV of customers, then save the good ones."""
    return services.run_import(job=job, tracker=tracker)

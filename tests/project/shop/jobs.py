"""Job types of every shape the library runs: whole, in parts, safe to run
twice or not. Each counts to params["steps"], pausing params["pause"]
seconds a step, and fails at params["fail_at"] if given."""

import time
from typing import Any

from django.urls import reverse

from webfarm.progress.api import Job, JobFailed, JobPart, JobResult, PartSpec, Tracker, job_type

STAGES = [("counting", 90), ("adding up", 10)]


def _count(tracker: Tracker, params: dict[str, Any], steps: int) -> None:
    tracker.reporter.stage("counting", total=steps)
    for done in range(1, steps + 1):
        if done == params.get("fail_at"):
            raise JobFailed(f"Stopped at step {done}, as asked.")
        time.sleep(float(params.get("pause", 0)))
        tracker.reporter.update(done)


def _result(job: Job, counted: int) -> JobResult:
    return JobResult(url=reverse("shop:job", args=[job.id]), summary=f"counted to {counted}", value=counted)


def _describe(params: dict[str, Any]) -> str:
    return f"Count to {params.get('steps', 10)}"


# What both job types are besides their name and title: counts, safe to run twice.
COUNTING: dict[str, Any] = {
    "noun": "count",
    "stages": STAGES,
    "retry_on_lost": True,
    "page": "shop:job",
    "describe": _describe,
}


@job_type("count", title="Count", **COUNTING)
def count(*, job: Job, params: dict[str, Any], tracker: Tracker) -> JobResult:
    steps = int(params.get("steps", 10))
    _count(tracker, params, steps)
    tracker.reporter.stage("adding up", total=1)
    tracker.reporter.update(1)
    return _result(job, steps)


def _split(params: dict[str, Any]) -> list[PartSpec]:
    parts, steps = int(params.get("parts", 3)), int(params.get("steps", 9))
    return [PartSpec(params={"steps": steps // parts}, size=steps // parts) for _ in range(parts)]


def _merge(*, job: Job, parts: list[JobPart], params: dict[str, Any], tracker: Tracker) -> JobResult:
    tracker.reporter.stage("adding up", total=len(parts))
    counted = 0
    for done, part in enumerate(parts, 1):
        counted += int(part.result["counted"])
        tracker.reporter.update(done)
    return _result(job, counted)


@job_type("count-parts", title="Count in parts", split=_split, merge=_merge, **COUNTING)
def count_part(*, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker) -> dict[str, Any]:
    steps = int(part.params["steps"])
    _count(tracker, params, steps)
    return {"counted": steps}

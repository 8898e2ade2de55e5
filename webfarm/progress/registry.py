"""The registry of job types: finds one by name on any node (the web node
that starts it, the worker that runs it, the reaper that runs it again).

A job type registers itself (job_type() does it; a JobType subclass's
instance is given to register()); an app whose job types come from a setting
registers a source instead, a function read on every lookup, so the setting
can change under a test.
"""

from collections.abc import Callable, Iterable
from typing import TypeVar

from webfarm.progress.jobtype_base import JobTypeBase

# A job type's name is in URLs, counters' labels and the job row (max 64).
MAX_NAME = 64

_registered: dict[str, JobTypeBase] = {}
_sources: list[Callable[[], Iterable[JobTypeBase]]] = []


Source = Callable[[], Iterable[JobTypeBase]]
Registered = TypeVar("Registered", bound=JobTypeBase | Source)


def register(job: Registered) -> Registered:
    """A job type, found by its name on every node; or a source of job types
    (a function returning them, asked on every lookup). Returns what it got."""
    if not isinstance(job, JobTypeBase):
        add_source(job)
        return job
    if not 0 < len(job.name) <= MAX_NAME:
        raise ValueError(f"a job type's name has 1 to {MAX_NAME} characters: {job.name!r}")
    existing = _registered.get(job.name)
    if existing is not None and type(existing).__qualname__ != type(job).__qualname__:
        raise ValueError(f"two job types are named {job.name!r}")
    _registered[job.name] = job
    return job


def add_source(source: Callable[[], Iterable[JobTypeBase]]) -> None:
    """Job types another app holds (from its settings): asked on every lookup."""
    if source not in _sources:
        _sources.append(source)


def all_job_types() -> dict[str, JobTypeBase]:
    found = dict(_registered)
    for source in _sources:
        for job in source():
            found.setdefault(job.name, job)
    return found


def get_job_type(name: str) -> JobTypeBase | None:
    found = _registered.get(name)
    if found is not None:
        return found
    return next((job for source in _sources for job in source() if job.name == name), None)

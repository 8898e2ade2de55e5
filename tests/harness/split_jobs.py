"""A job type split in parts whose parts wait (sleep) in small steps, for
the fan-out tests and bench/fanout.py: loaded by the workers with
--include, and by the process that starts the jobs. Each part and each
merge notes itself in memcached (`splittest:<job>:...`), where the test
reads how often each ran and where, and when each step of a part ended.
A job started with params["hold"] keeps its parts (those from index
params["hold_from"] on, if given) from their first step until the test
releases that name, or the hold lapses or goes with its memcached."""

import os
import time
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.progress.api import (
    Job,
    JobFailed,
    JobPart,
    JobResult,
    JobType,
    PartSpec,
    SlotLimits,
    Tracker,
    register,
)

STEPS = 10
# The longest a hold keeps parts waiting, should its test never release it.
HOLD_AT_MOST = 120


def _hold_key(name: str) -> str:
    return f"splittest:hold:{name}"


def hold(name: str) -> None:
    get_client().set(_hold_key(name), b"1", expire=HOLD_AT_MOST)


def release(name: str) -> None:
    get_client().delete(_hold_key(name))


def _wait_while_held(name: str) -> None:
    """Until the hold is released, or gone with the memcached that held it."""
    try:
        while get_client().get(_hold_key(name)) is not None:
            time.sleep(0.05)
    except (MemcacheError, OSError):
        pass  # memcached stopped: the hold went with it


def _note(job_id: str, what: str, value: str) -> None:
    client = get_client()
    key = f"splittest:{job_id}:{what}"
    if not client.append(key, f"{value},".encode()):
        client.add(key, f"{value},".encode(), expire=3600)


class SplitSleep(JobType):
    """Each part waits params["seconds"] in STEPS steps; the part whose index
    is params["fail"] fails the job half-way. One such job per user at once."""

    name = "split-sleep"
    title = "Parts that wait"
    stages = (("waiting", 90), ("merging", 10))

    def limits(self, user: Any) -> SlotLimits:
        return SlotLimits(group="splittest", per_user=1, per_kind=50)

    def split(self, params: dict[str, Any]) -> list[PartSpec]:
        return [PartSpec(size=1 + n % 3, params={"n": n}) for n in range(params["parts"])]

    def run_part(
        self, *, job: Job, part: JobPart, params: dict[str, Any], tracker: Tracker
    ) -> dict[str, Any]:
        n = part.params["n"]
        _note(job.id, f"part{n}", f"{os.getpid()}@{part.attempt}")
        tracker.reporter.stage("waiting", total=STEPS)
        if params.get("hold") and n >= params.get("hold_from", 0):
            _wait_while_held(params["hold"])
        for step in range(1, STEPS + 1):
            time.sleep(params["seconds"] / STEPS)
            if params.get("fail") == n and step == STEPS // 2:
                raise JobFailed(f"Part {n + 1} found a row it cannot read.")
            tracker.reporter.update(step)
            # When each step's update returned: the cancel test counts those after its cancel.
            _note(job.id, f"steps{n}", f"{time.time():.3f}")
        return {"n": n}

    def merge(self, *, job: Job, parts: list[JobPart], params: dict[str, Any], tracker: Tracker) -> JobResult:
        tracker.reporter.stage("merging", total=len(parts))
        _note(job.id, "merge", str(os.getpid()))
        total = sum(part.result["n"] for part in parts)
        return JobResult(summary=f"{len(parts)} parts, sum {total}")


split_sleep = register(SplitSleep())

"""The job record kept in memcached: one key per job, read in one round trip."""

import json
import math
import re
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from webfarm.progress.ids import is_valid_job_id
from webfarm.progress.states import FINAL_STATES, State

_STATES = frozenset(s.value for s in State)
# A timestamp after 2286 is no timestamp (and overflows datetime).
_LATEST = 1e10
# Where a result may be downloaded: a path on this site, never another origin
# or a javascript: URL (the widget puts it in a link).
RESULT_URL_RE = re.compile(r"/(?![/\\])[A-Za-z0-9/_.~%-]*")


# The most parts a job may be split into: every part's progress is in the
# job's record, which every poll reads.
MAX_PARTS = 64
# How many workers the public document names (a part's worker may be anyone).
MAX_WORKERS_SHOWN = 8
# The most a job's metadata may take as JSON: it rides in the record every
# poll reads (a body's `context.metadata`, django.tasks' proposed API).
MAX_METADATA_BYTES = 4096


class CorruptRecord(ValueError):
    """Bytes that are not a job record this code wrote."""


@dataclass
class PartProgress:
    """One part's progress, inside its job's record (webfarm.progress.parts.combined)."""

    size: int = 1
    done: float = 0.0  # the fraction of this part finished
    state: str = State.QUEUED
    worker: str = ""
    rate: float = 0.0  # the fraction of this part finished per second, smoothed
    beat_at: float | None = None
    attempt: int = 1

    def to_list(self) -> list[Any]:
        return [self.size, self.done, self.state, self.worker, self.rate, self.beat_at, self.attempt]

    @classmethod
    def from_list(cls, value: Any) -> "PartProgress":
        if not (isinstance(value, list) and len(value) == 7):
            raise CorruptRecord("bad part")
        size, done, state, worker, rate, beat_at, attempt = value
        if not (
            _int(size)
            and _number(done)
            and 0 <= done <= 1
            and state in _STATES
            and _text(worker)
            and len(worker) <= 200
            and _number(rate)
            and rate >= 0
            and _optional(_time)(beat_at)
            and _int(attempt)
            and attempt >= 1
        ):
            raise CorruptRecord("bad part")
        return cls(size, done, state, worker, rate, beat_at, attempt)


@dataclass
class JobRecord:
    job: str
    owner: int
    kind: str
    title: str = ""
    state: str = State.QUEUED
    # current/total count the current stage's units (rows, bytes...);
    # percent is the whole job's, across stages.
    current: int = 0
    total: int | None = None
    percent: float | None = None
    stage: str = ""
    message: str = ""
    eta_seconds: float | None = None
    created_at: float = 0.0
    started_at: float | None = None
    updated_at: float = 0.0
    heartbeat_at: float | None = None
    finished_at: float | None = None
    result_url: str = ""
    error: str = ""
    cancel_requested: bool = False
    attempt: int = 1
    retried_as: str = ""
    # Farm-wide limit slots the job holds (webfarm.core.slots); released when it ends.
    slots: list[str] = field(default_factory=list)
    # The progress URL's capability (Job.read_token); never in public().
    read_token: str = ""
    # A job split in parts: each part's progress (the bar combines them).
    parts: list[PartProgress] = field(default_factory=list)
    # What the body saved for its callers to read while it runs (JSON, small).
    metadata: dict[str, Any] = field(default_factory=dict)

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    def to_bytes(self) -> bytes:
        data = asdict(self)
        data["parts"] = [part.to_list() for part in self.parts]  # compact: every poll reads it
        return json.dumps(data, separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "JobRecord":
        """Parse and check a record; CorruptRecord for anything else."""
        try:
            data = json.loads(raw)
        except (ValueError, RecursionError) as exc:
            raise CorruptRecord("not JSON") from exc
        if not isinstance(data, dict):
            raise CorruptRecord("not an object")
        known = {f.name: f for f in fields(cls)}
        values = {k: v for k, v in data.items() if k in known}
        for name, value in values.items():
            if not _CHECKS[name](value):
                raise CorruptRecord(f"bad {name}")
        if not {"job", "owner", "kind"} <= values.keys():
            raise CorruptRecord("job, owner or kind missing")
        if "parts" in values:
            values["parts"] = [PartProgress.from_list(part) for part in values["parts"]]
        return cls(**values)

    def part_counts(self) -> dict[str, Any] | None:
        """How many parts are queued, running and done, and on which workers."""
        if not self.parts:
            return None
        states = [part.state for part in self.parts]
        workers = sorted({part.worker for part in self.parts if part.state == State.RUNNING and part.worker})
        return {
            "total": len(states),
            "queued": states.count(State.QUEUED),
            "running": states.count(State.RUNNING),
            "done": states.count(State.SUCCEEDED),
            "workers": workers[:MAX_WORKERS_SHOWN],
        }

    def public(self) -> dict[str, Any]:
        """The JSON shape of GET /progress/<job>/ (no owner, ISO times)."""
        return {
            "job": self.job,
            "kind": self.kind,
            "title": self.title,
            "state": self.state,
            "current": self.current,
            "total": self.total,
            "percent": self.percent,
            "stage": self.stage,
            "message": self.message,
            "eta_seconds": self.eta_seconds,
            "created_at": iso(self.created_at),
            "started_at": iso(self.started_at),
            "updated_at": iso(self.updated_at),
            "heartbeat_at": iso(self.heartbeat_at),
            "finished_at": iso(self.finished_at),
            "result_url": self.result_url or None,
            "error": self.error or None,
            "cancel_requested": self.cancel_requested,
            "attempt": self.attempt,
            # A lost job run again: the same progress URL with this job id.
            "retried_as": self.retried_as or None,
            # A job split in parts: {total, queued, running, done, workers}; else null.
            "parts": self.part_counts(),
            "metadata": self.metadata,
            "final": self.is_final,
        }


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")


def _int(value: Any) -> bool:
    return isinstance(value, int) and not isinstance(value, bool) and 0 <= value < 2**63


def _number(value: Any) -> bool:
    return isinstance(value, int | float) and not isinstance(value, bool) and math.isfinite(value)


def _time(value: Any) -> bool:
    return _number(value) and 0 <= value < _LATEST


def _optional(check: Any) -> Any:
    return lambda value: value is None or check(value)


def _text(value: Any) -> bool:
    return isinstance(value, str) and len(value) <= 10_000


def _job_id_or_empty(value: Any) -> bool:
    return value == "" or is_valid_job_id(value)


def metadata_problem(value: Any) -> str | None:
    """Why `value` cannot be a job's metadata, or None if it can."""
    if not isinstance(value, dict):
        return f"metadata must be a dict, not {type(value).__name__}"
    try:
        size = len(json.dumps(value, separators=(",", ":"), allow_nan=False))
    except (TypeError, ValueError, RecursionError) as exc:
        return f"metadata must be JSON: {exc}"
    if size > MAX_METADATA_BYTES:
        return f"metadata takes {size} bytes as JSON, more than {MAX_METADATA_BYTES}"
    return None


_CHECKS: dict[str, Any] = {
    "job": is_valid_job_id,
    "owner": _int,
    "kind": _text,
    "title": _text,
    "state": lambda v: v in _STATES,
    "current": _int,
    "total": _optional(_int),
    "percent": _optional(lambda v: _number(v) and 0 <= v <= 100),
    "stage": _text,
    "message": _text,
    "eta_seconds": _optional(lambda v: _number(v) and v >= 0),
    "created_at": _time,
    "started_at": _optional(_time),
    "updated_at": _time,
    "heartbeat_at": _optional(_time),
    "finished_at": _optional(_time),
    "result_url": lambda v: v == "" or (isinstance(v, str) and RESULT_URL_RE.fullmatch(v) is not None),
    "error": _text,
    "cancel_requested": lambda v: isinstance(v, bool),
    "attempt": lambda v: _int(v) and v >= 1,
    "retried_as": _job_id_or_empty,
    "slots": lambda v: isinstance(v, list) and len(v) <= 16 and all(_text(k) and len(k) <= 200 for k in v),
    "read_token": _job_id_or_empty,
    "parts": lambda v: isinstance(v, list) and len(v) <= MAX_PARTS,
    "metadata": lambda v: metadata_problem(v) is None,
}

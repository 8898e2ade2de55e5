"""The job record kept in memcached: one key per job, read in one round trip."""

import json
from dataclasses import asdict, dataclass, field, fields
from datetime import UTC, datetime
from typing import Any

from progress.states import FINAL_STATES, State


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
    # Farm-wide limit slots the job holds (limits.slots); released when it ends.
    slots: list[str] = field(default_factory=list)
    # The progress URL's capability (Job.read_token); never in public().
    read_token: str = ""

    @property
    def is_final(self) -> bool:
        return self.state in FINAL_STATES

    def to_bytes(self) -> bytes:
        return json.dumps(asdict(self), separators=(",", ":")).encode()

    @classmethod
    def from_bytes(cls, raw: bytes) -> "JobRecord":
        data = json.loads(raw)
        known = {f.name for f in fields(cls)}
        return cls(**{k: v for k, v in data.items() if k in known})

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
            "final": self.is_final,
        }


def iso(timestamp: float | None) -> str | None:
    if timestamp is None:
        return None
    return datetime.fromtimestamp(timestamp, UTC).isoformat(timespec="milliseconds")

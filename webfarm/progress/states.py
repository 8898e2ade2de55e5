"""Job states: lower case, the same in JSON, UI and counters."""

from enum import StrEnum


class State(StrEnum):
    QUEUED = "queued"
    RUNNING = "running"
    SUCCEEDED = "succeeded"
    FAILED = "failed"
    CANCELLED = "cancelled"
    LOST = "lost"


FINAL_STATES = frozenset({State.SUCCEEDED, State.FAILED, State.CANCELLED, State.LOST})

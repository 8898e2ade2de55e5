"""One bar for a job split in parts.

Every part's writer puts its own progress into its entry of the job's record
(a cas over the record memcached holds, so parts never write over each
other), and the job's percent and ETA are computed from all the
entries there. The record stays one key: a poll, nginx's fast path
included, still costs one round trip, whatever the number of parts.

The parts do the job's first stage; the merge does the rest. So the parts'
combined fraction fills the first stage's share of the bar (`share`), and
the merge moves it from there to 100 %.
"""

from collections.abc import Sequence

from webfarm.progress.records import JobRecord, PartProgress
from webfarm.progress.states import State


def parts_share(stages: Sequence[tuple[str, float]]) -> float:
    """The share of the whole job that its parts do: its first stage's weight."""
    whole = sum(weight for _, weight in stages)
    return stages[0][1] / whole if whole > 0 else 1.0


def _weights(parts: Sequence[PartProgress]) -> list[float]:
    sizes = [part.size for part in parts]
    total = sum(sizes)
    # Parts that all say size 0 weigh the same.
    return [size / total for size in sizes] if total else [1 / len(parts)] * len(parts)


def combine(record: JobRecord, *, share: float) -> None:
    """Set the job's percent, ETA and current/total (parts done of all) from
    its parts' entries; the message is the parts' own (PartReporter). The
    ETA is the work left over the rate at which the running parts do it
    now: parts waiting for a worker add work, not speed."""
    parts = record.parts
    if not parts:
        return
    weights = _weights(parts)
    done = sum(
        w * (1.0 if p.state == State.SUCCEEDED else p.done) for w, p in zip(weights, parts, strict=True)
    )
    rate = sum(w * p.rate for w, p in zip(weights, parts, strict=True) if p.state == State.RUNNING)
    record.percent = round(min(share * done, 1.0) * 100, 1)
    left = share * (1.0 - done) + (1.0 - share)
    record.eta_seconds = round(left / (share * rate), 1) if rate > 0 and share > 0 else None
    counts = record.part_counts() or {}
    record.current, record.total = counts["done"], counts["total"]

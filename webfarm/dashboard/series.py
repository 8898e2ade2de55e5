"""Counter history as chart series: harvested samples from the database plus
what memcached has counted since the last harvest (put in the current hour or
minute), so the charts are current without waiting for the harvester.

A series is JSON-ready: {"labels": [...], "lines": {name: [values]}} with one
value per hour (or minute) per line, oldest first.
"""

import math
from collections import defaultdict
from collections.abc import Callable, Iterable
from datetime import UTC, datetime, timedelta
from typing import Any

from django.db.models import Model

from webfarm.core.counters import DURATION_BUCKETS
from webfarm.progress.states import State
from webfarm.stats.models import CounterMinute, CounterSample
from webfarm.stats.selectors import unharvested

JOB_STATES = [State.QUEUED, State.RUNNING, State.SUCCEEDED, State.FAILED, State.CANCELLED, State.LOST]
PERCENTILES = (50, 95)


def parse_key(key: str) -> tuple[str, dict[str, str]]:
    """ "name|label=v|..." -> (name, labels)."""
    name, *labels = key.split("|")
    return name, dict(label.split("=", 1) for label in labels)


def quantile(q: float, buckets: dict[str, float]) -> float | None:
    """The q-quantile (0..1) of a histogram kept as counts per bucket, keyed by
    upper bound ("inf" last), interpolating linearly inside a bucket as
    Prometheus's histogram_quantile does. Past the last bound it answers the
    last bound: the histogram knows no more."""
    bounds = [*DURATION_BUCKETS, math.inf]
    counts = [buckets.get("inf" if math.isinf(b) else str(b), 0) for b in bounds]
    total = sum(counts)
    if not total:
        return None
    rank, below, lower = q * total, 0.0, 0.0
    for bound, n in zip(bounds, counts, strict=True):
        if n and below + n >= rank:
            if math.isinf(bound):
                return float(lower)
            return lower + (bound - lower) * (rank - below) / n
        below += n
        lower = bound
    return float(DURATION_BUCKETS[-1])


def _steps(now: datetime, count: int, step: timedelta) -> list[datetime]:
    last = now.replace(second=0, microsecond=0)
    if step >= timedelta(hours=1):
        last = last.replace(minute=0)
    return [last - step * (count - 1 - i) for i in range(count)]


def _grouped(
    rows: Iterable[tuple[str, datetime, int]], slots: list[datetime], group: Callable[[str], str | None]
) -> dict[str, list[float]]:
    """Sum values per (group(key), slot); group returns None to leave a key out."""
    index = {slot: i for i, slot in enumerate(slots)}
    lines: dict[str, list[float]] = defaultdict(lambda: [0] * len(slots))
    for key, when, value in rows:
        name = group(key)
        if name is not None and when in index:
            lines[name][index[when]] += value
    return dict(lines)


Row = tuple[str, datetime, int]


def _rows(model: type[Model], field: str, since: datetime, names: tuple[str, ...]) -> list[Row]:
    query = model._default_manager.filter(**{f"{field}__gte": since}).values_list("key", field, "value")
    return [row for row in query if parse_key(row[0])[0] in names]


def _by_label(name: str, label: str) -> Callable[[str], str | None]:
    """A grouping for _grouped: the key's `label`, for keys of counter `name`."""

    def group(key: str) -> str | None:
        key_name, labels = parse_key(key)
        return labels.get(label) if key_name == name else None

    return group


def build(*, hours: int, minutes: int, now: datetime | None = None) -> dict[str, Any]:
    """Every chart's series in one pass over the samples."""
    now = now or datetime.now(UTC)
    hour_slots = _steps(now, hours, timedelta(hours=1))
    minute_slots = _steps(now, minutes, timedelta(minutes=1))
    pending, live = unharvested()
    hourly = _rows(CounterSample, "hour", hour_slots[0], ("jobs", "job_seconds", "refused"))
    hourly += [(key, hour_slots[-1], value) for key, value in pending.items() if value]
    recent = _rows(CounterMinute, "minute", minute_slots[0], ("progress_polls",))
    recent += [(key, minute_slots[-1], value) for key, value in pending.items() if value]

    jobs = _grouped(hourly, hour_slots, _by_label("jobs", "state"))
    buckets = _grouped(hourly, hour_slots, _by_label("job_seconds", "le"))
    percentiles = {
        f"p{p}": [quantile(p / 100, {le: n[i] for le, n in buckets.items()}) for i in range(hours)]
        for p in PERCENTILES
    }
    refusals = _grouped(hourly, hour_slots, _by_label("refused", "reason"))
    polls = _grouped(recent, minute_slots, lambda key: "polls" if key == "progress_polls" else None)
    hour_labels = [slot.isoformat() for slot in hour_slots]
    return {
        "live": live,
        "jobs": {"labels": hour_labels, "lines": {s: jobs.get(s, [0] * hours) for s in JOB_STATES}},
        "durations": {"labels": hour_labels, "lines": percentiles},
        "polls": {
            "labels": [slot.isoformat() for slot in minute_slots],
            "lines": {"polls": polls.get("polls", [0] * minutes)},
        },
        "refusals": {"labels": hour_labels, "lines": refusals},
    }

"""What the dashboard shows, each part read where it lives. Aggregates over
the counter history go through get_or_set, so a room full of admins makes one
computation per period farm-wide."""

import base64
from dataclasses import asdict
from datetime import UTC, datetime, timedelta
from typing import Any

from pymemcache.exceptions import MemcacheError

from webfarm.activity import recent
from webfarm.activity.conf import log_file
from webfarm.core.memo import get_or_set
from webfarm.dashboard import charts, series
from webfarm.dashboard.conf import get_config
from webfarm.dashboard.servers import farm_servers
from webfarm.dashboard.workers import live_workers
from webfarm.progress.models import Job
from webfarm.progress.selectors import job_rows
from webfarm.progress.states import State
from webfarm.queues.exceptions import QueueError
from webfarm.queues.rings import farm_queues
from webfarm.stats.models import DailySummary
from webfarm.stats.selectors import totals

CHARTS = tuple(charts.TITLES)

# Daily summary columns: (heading, counter name, labels the key must carry).
SUMMARY_COLUMNS: list[tuple[str, str, dict[str, str]]] = [
    ("Jobs queued", "jobs", {"state": "queued"}),
    ("Succeeded", "jobs", {"state": "succeeded"}),
    ("Failed", "jobs", {"state": "failed"}),
    ("Cancelled", "jobs", {"state": "cancelled"}),
    ("Lost", "jobs", {"state": "lost"}),
    ("Polls", "progress_polls", {}),
    ("Downloads", "downloads", {}),
    ("Refused", "refused", {}),
    ("Logins", "logins", {}),
    ("New accounts", "accounts_created", {}),
    ("Queue messages in", "queue_messages", {"direction": "in"}),
]


def chart_series() -> dict[str, Any]:
    config = get_config()
    return get_or_set(
        "dashboard:series",
        lambda: series.build(hours=config["HOURS"], minutes=config["MINUTES"]),
        ttl=config["CHART_TTL"],
    )


def chart_png(name: str) -> bytes:
    """The chart's picture; drawn from the same cached series as the page's tables."""

    def draw() -> str:
        return base64.b64encode(charts.render(name, chart_series()[name])).decode()

    return base64.b64decode(get_or_set(f"dashboard:chart:{name}", draw, ttl=get_config()["CHART_TTL"]))


def chart_tables(all_series: dict[str, Any]) -> list[dict[str, Any]]:
    """Each chart's numbers as a table (the rows with something in them), shown
    under the picture for screen readers and for copying."""
    tables = []
    for name in CHARTS:
        data = all_series[name]
        columns = list(data["lines"])
        rows = []
        for i, label in enumerate(data["labels"]):
            values = [data["lines"][c][i] for c in columns]
            if any(values):
                when = datetime.fromisoformat(label)
                rows.append((when, [None if v is None else round(v, 1) for v in values]))
        tables.append({"name": name, "title": charts.TITLES[name], "columns": columns, "rows": rows[::-1]})
    return tables


def counter_totals() -> dict[str, Any]:
    def compute() -> dict[str, Any]:
        values, live = totals()
        return {"values": sorted(values.items()), "live": live}

    return get_or_set("dashboard:totals", compute, ttl=get_config()["CHART_TTL"])


def daily_summaries() -> dict[str, Any]:
    since = datetime.now(UTC).date() - timedelta(days=get_config()["DAYS"] - 1)
    days: dict[str, list[int]] = {}
    for key, day, value in DailySummary.objects.filter(day__gte=since).values_list("key", "day", "value"):
        name, labels = series.parse_key(key)
        row = days.setdefault(day.isoformat(), [0] * len(SUMMARY_COLUMNS))
        for i, (_, column, wanted) in enumerate(SUMMARY_COLUMNS):
            if name == column and all(labels.get(k) == v for k, v in wanted.items()):
                row[i] += value
    return {
        "columns": [heading for heading, _, _ in SUMMARY_COLUMNS],
        "rows": sorted(days.items(), reverse=True),
    }


def servers() -> list[dict[str, Any]]:
    return [
        {
            **asdict(h),
            "hit_percent": None if h.hit_ratio is None else round(100 * h.hit_ratio, 1),
            "used_percent": None if h.used is None else round(100 * h.used, 1),
        }
        for h in farm_servers()
    ]


def queues() -> tuple[list[dict[str, Any]], str]:
    """Each known queue's depth and counts, and an error if they cannot be listed."""
    try:
        found, problems = farm_queues()
    except (MemcacheError, OSError) as exc:
        return [], f"memcached unreachable: {exc}"
    rows = []
    for farm_queue in found:
        try:
            rows.append({"name": farm_queue.title, **farm_queue.queue().stats()})
        except (QueueError, LookupError) as exc:
            rows.append({"name": farm_queue.title, "error": str(exc)})
    return rows, "; ".join(problems)


def workers() -> tuple[list[dict[str, Any]], str]:
    try:
        return live_workers(), ""
    except (MemcacheError, OSError) as exc:
        return [], f"memcached unreachable: {exc}"


def activity() -> list[dict[str, Any]]:
    entries = recent.newest(get_config()["ACTIVITY_ENTRIES"], log_file())
    for entry in entries:
        ts = entry.get("ts")
        entry["when"] = datetime.fromtimestamp(ts, UTC) if isinstance(ts, int | float) else None
    return entries


def running_jobs() -> tuple[list, int]:
    """The newest unfinished jobs beside their live records, and how many there are."""
    unfinished = Job.objects.filter(state__in=[State.QUEUED, State.RUNNING]).select_related("owner")
    return job_rows(unfinished[: get_config()["RUNNING_JOBS"]]), unfinished.count()


def live_parts() -> dict[str, Any]:
    """The parts the page refreshes every few seconds."""
    queue_rows, queue_error = queues()
    worker_rows, worker_error = workers()
    return {
        "servers": servers(),
        "queues": queue_rows,
        "queue_error": queue_error,
        "workers": worker_rows,
        "worker_error": worker_error,
        "activity": activity(),
    }

"""Move counter increments from memcached into the database, losslessly.

Counters in memcached only go up. For each one the database keeps the raw
value it has read so far (a watermark) and the generation of memcached's
counters it was read in. A harvest adds raw - watermark to the hour's sample
(and to the minute's, kept two days for the dashboard's recent charts) and
moves the watermark, under a row lock, in one transaction per counter:

* an increment made while harvesting is simply above the new watermark and is
  taken next time: nothing falls between a read and a reset, because nothing
  is reset;
* harvesting twice adds 0 the second time; two harvesters at once queue on
  the row lock, and the second sees the first's watermark: nothing counts twice;
* memcached restarted (new generation, or a raw value below the watermark):
  the whole raw value is new. What was counted since the last harvest and
  then lost with memcached is gone; harvest often.
"""

from datetime import UTC, date, datetime, timedelta
from typing import Any

from django.db import transaction
from django.db.models import F, Sum
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.queues.exceptions import QueueError
from webfarm.stats import sources
from webfarm.stats.models import CountedValue, CounterMinute, CounterSample, CounterWatermark, DailySummary

# Minute samples feed the dashboard's recent charts; hours are kept for good.
KEEP_MINUTES = timedelta(hours=48)


class HarvestUnavailable(Exception):
    pass


def _hour(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0)


def _minute(now: datetime) -> datetime:
    return now.replace(second=0, microsecond=0)


def harvest(*, now: datetime | None = None) -> dict[str, int]:
    """Harvest every listed counter; returns what was added per key."""
    now = now or datetime.now(UTC)
    client = get_client()
    try:
        added = {}
        for key in sorted(set(sources.listed(client))):
            delta = _take(client, key, now)
            if delta:
                added[key] = delta
        CounterMinute.objects.filter(minute__lt=now - KEEP_MINUTES).delete()
        return added
    except (MemcacheError, OSError, QueueError) as exc:
        raise HarvestUnavailable(f"memcached unreachable: {exc}") from exc


def new_since(mark: CounterWatermark | None, raw: int, generation: str) -> int:
    """Increments in `raw` that the watermark has not taken yet. After memcached
    lost its counters (another generation, or a value below the mark) all of
    raw is new."""
    if mark is None or mark.generation != generation or raw < mark.raw:
        return raw
    return raw - mark.raw


def _take(client: object, key: str, now: datetime) -> int:
    with transaction.atomic():
        mark, _ = CounterWatermark.objects.select_for_update().get_or_create(
            key=key, defaults={"generation": "", "raw": 0}
        )
        # Read under the lock: a value read before it could be older than the
        # watermark another harvester just wrote, and would look like a reset.
        found = sources.read(client, [key])
        if key not in found:
            return 0
        generation, raw = found[key]
        delta = new_since(mark, raw, generation)
        mark.generation, mark.raw = generation, raw
        mark.save()
        if delta:
            _add(CounterSample, key=key, hour=_hour(now), delta=delta)
            _add(CounterMinute, key=key, minute=_minute(now), delta=delta)
    return delta


def _add(model: type[CountedValue], *, delta: int, **where: Any) -> None:
    row, _ = model._default_manager.get_or_create(**where)
    model._default_manager.filter(pk=row.pk).update(value=F("value") + delta)


def summarise(day: date) -> int:
    """(Re)build the daily summaries of `day` from the hourly samples."""
    totals = CounterSample.objects.filter(hour__date=day).values("key").annotate(total=Sum("value"))
    with transaction.atomic():
        DailySummary.objects.filter(day=day).delete()
        DailySummary.objects.bulk_create(
            [DailySummary(key=t["key"], day=day, value=t["total"]) for t in totals]
        )
    return len(totals)

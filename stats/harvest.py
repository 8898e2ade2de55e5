"""Move counter increments from memcached into the database, losslessly.

Counters in memcached only go up. For each one the database keeps the raw
value it has read so far (a watermark) and the generation of memcached's
counters it was read in. A harvest adds raw - watermark to the hour's sample
and moves the watermark, under a row lock, in one transaction per counter:

* an increment made while harvesting is simply above the new watermark and is
  taken next time: nothing falls between a read and a reset, because nothing
  is reset;
* harvesting twice adds 0 the second time; two harvesters at once queue on
  the row lock, and the second sees the first's watermark: nothing counts twice;
* memcached restarted (new generation, or a raw value below the watermark):
  the whole raw value is new. What was counted since the last harvest and
  then lost with memcached is gone; harvest often.
"""

from datetime import UTC, date, datetime

from django.db import transaction
from django.db.models import F, Sum
from pymemcache.exceptions import MemcacheError

from progress.client import get_client
from stats.counters import GENERATION, REGISTRY
from stats.models import CounterSample, CounterWatermark, DailySummary


class HarvestUnavailable(Exception):
    pass


def _hour(now: datetime) -> datetime:
    return now.replace(minute=0, second=0, microsecond=0)


def harvest(*, now: datetime | None = None) -> dict[str, int]:
    """Harvest every registered counter; returns what was added per key."""
    now = now or datetime.now(UTC)
    client = get_client()
    try:
        listed = (client.get(REGISTRY) or b"").decode().split("\n")
        added = {}
        for key in sorted({k for k in listed if k}):
            delta = _take(client, key, now)
            if delta:
                added[key] = delta
        return added
    except (MemcacheError, OSError) as exc:
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
        found = client.get_many([GENERATION, f"c:{key}"])
        if f"c:{key}" not in found:
            return 0
        generation, raw = found.get(GENERATION, b"").decode(), int(found[f"c:{key}"])
        delta = new_since(mark, raw, generation)
        mark.generation, mark.raw = generation, raw
        mark.save()
        if delta:
            sample, _ = CounterSample.objects.get_or_create(key=key, hour=_hour(now))
            CounterSample.objects.filter(pk=sample.pk).update(value=F("value") + delta)
    return delta


def summarise(day: date) -> int:
    """(Re)build the daily summaries of `day` from the hourly samples."""
    totals = CounterSample.objects.filter(hour__date=day).values("key").annotate(total=Sum("value"))
    with transaction.atomic():
        DailySummary.objects.filter(day=day).delete()
        DailySummary.objects.bulk_create(
            [DailySummary(key=t["key"], day=day, value=t["total"]) for t in totals]
        )
    return len(totals)

"""Counter totals: what the database holds plus what memcached has counted since."""

from django.db.models import Sum
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.core.counters import counter_key
from webfarm.queues.exceptions import QueueError
from webfarm.queues.rings import farm_queues
from webfarm.stats import sources
from webfarm.stats.harvest import new_since
from webfarm.stats.models import CounterSample, CounterWatermark


def totals() -> tuple[dict[str, int], bool]:
    """Every counter's all-time total, and whether memcached's part is in it."""
    result = {
        row["key"]: row["total"] for row in CounterSample.objects.values("key").annotate(total=Sum("value"))
    }
    pending, live = unharvested()
    for key, value in pending.items():
        result[key] = result.get(key, 0) + value
    return result, live


def unharvested() -> tuple[dict[str, int], bool]:
    """What memcached has counted since the last harvest, per counter, and
    whether memcached answered."""
    try:
        client = get_client()
        raws = sources.read(client, sources.listed(client))
    except (MemcacheError, OSError, QueueError):
        return {}, False
    marks = {m.key: m for m in CounterWatermark.objects.filter(key__in=list(raws))}
    return {key: new_since(marks.get(key), raw, gen) for key, (gen, raw) in raws.items()}, True


def gauges() -> dict[str, int]:
    """What is there now (not counts of events): messages waiting and dead
    letters kept, per queue. Empty when memcached cannot be asked."""
    values: dict[str, int] = {}
    try:
        found, _ = farm_queues()
    except (MemcacheError, OSError):
        return values
    for farm_queue in found:
        try:
            stats = farm_queue.queue().stats()
        except (QueueError, LookupError):
            continue
        values[counter_key("queue_ready", **farm_queue.labels())] = stats["ready"]
        values[counter_key("queue_dead_letters", **farm_queue.labels())] = stats["dead_letters"]
    return values


def prometheus(values: dict[str, int], current: dict[str, int] | None = None) -> str:
    """`name|label=v|...` keys -> Prometheus text format, one family per name:
    counters from `values`, gauges from `current`."""
    families: dict[tuple[str, str], list[str]] = {}
    for kind, suffix, items in (("counter", "_total", values), ("gauge", "", current or {})):
        for key, value in sorted(items.items()):
            name, *labels = key.split("|")
            label_text = ",".join(f'{k}="{v}"' for k, v in (label.split("=", 1) for label in labels))
            metric = f"webfarm_{name}{suffix}"
            families.setdefault((metric, kind), []).append(
                f"{metric}{{{label_text}}} {value}" if label_text else f"{metric} {value}"
            )
    lines = []
    for (metric, kind), samples in families.items():
        lines += [f"# TYPE {metric} {kind}", *samples]
    return "\n".join(lines) + "\n"

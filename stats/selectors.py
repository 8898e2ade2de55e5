"""Counter totals: what the database holds plus what memcached has counted since."""

from django.db.models import Sum
from pymemcache.exceptions import MemcacheError

from progress.client import get_client
from queues.exceptions import QueueError
from stats import sources
from stats.harvest import new_since
from stats.models import CounterSample, CounterWatermark


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


def prometheus(values: dict[str, int]) -> str:
    """`name|label=v|...` keys -> Prometheus text format, one family per name."""
    families: dict[str, list[str]] = {}
    for key, value in sorted(values.items()):
        name, *labels = key.split("|")
        label_text = ",".join(f'{k}="{v}"' for k, v in (label.split("=", 1) for label in labels))
        metric = f"webfarm_{name}_total"
        families.setdefault(metric, []).append(
            f"{metric}{{{label_text}}} {value}" if label_text else f"{metric} {value}"
        )
    lines = []
    for metric, samples in families.items():
        lines += [f"# TYPE {metric} counter", *samples]
    return "\n".join(lines) + "\n"

"""Counter totals: what the database holds plus what memcached has counted since."""

from django.db.models import Sum
from pymemcache.exceptions import MemcacheError

from progress.client import get_client
from stats.counters import GENERATION, REGISTRY
from stats.harvest import new_since
from stats.models import CounterSample, CounterWatermark


def totals() -> tuple[dict[str, int], bool]:
    """Every counter's all-time total, and whether memcached's part is in it."""
    result = {
        row["key"]: row["total"] for row in CounterSample.objects.values("key").annotate(total=Sum("value"))
    }
    try:
        client = get_client()
        keys = sorted({k for k in (client.get(REGISTRY) or b"").decode().split("\n") if k})
        generation = (client.get(GENERATION) or b"").decode()
        raws = client.get_many([f"c:{k}" for k in keys]) if keys else {}
    except (MemcacheError, OSError):
        return result, False
    marks = {m.key: m for m in CounterWatermark.objects.filter(key__in=keys)}
    for key in keys:
        raw = int(raws.get(f"c:{key}", b"0"))
        result[key] = result.get(key, 0) + new_since(marks.get(key), raw, generation)
    return result, True


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

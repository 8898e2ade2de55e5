"""A poll's running totals in memcached: their keys, and reading them.

The totals of one build live under an epoch (`poll:<id>:built` names it), so
a rebuild (demofarm.polls.services.rebuild_totals) starts new counters instead of
racing old ones. Anyone who can write memcached can make them lie; the votes
stored in the database decide (docs/security.md).
"""

from django.db.models import Count
from pymemcache.exceptions import MemcacheError

from demofarm.polls.models import Choice, Vote
from webfarm.core.client import get_client
from webfarm.core.memo import get_or_set


def total_key(poll_id: int, epoch: str, choice_id: int) -> str:
    return f"poll:{poll_id}:{epoch}:c:{choice_id}"


def built_key(poll_id: int) -> str:
    return f"poll:{poll_id}:built"


def is_epoch(raw: bytes | None) -> bool:
    """An epoch name rebuild_totals() wrote (anything else: the totals get rebuilt)."""
    return raw is not None and len(raw) == 8 and all(c in b"0123456789abcdef" for c in raw)


def db_totals(poll_id: int) -> dict[int, int]:
    counted = Vote.objects.filter(poll_id=poll_id).values("choice").annotate(n=Count("id"))
    choices = Choice.objects.filter(poll_id=poll_id).values_list("id", flat=True)
    totals = dict.fromkeys(choices, 0)
    totals.update({row["choice"]: row["n"] for row in counted})
    return totals


def live_totals(poll_id: int, choices: list[int]) -> tuple[dict[int, int], bool]:
    """The running totals from memcached, and whether they are live. While
    they are being rebuilt (or memcached is away), the database's, counted
    at most once a second farm-wide."""
    try:
        client = get_client()
        epoch = client.get(built_key(poll_id))
        keys = [total_key(poll_id, epoch.decode(), c) for c in choices] if is_epoch(epoch) else []
        found = client.get_many(keys) if keys else {}
    except (MemcacheError, OSError):
        keys, found = [], {}
    if keys and len(found) == len(keys) and all(value.isdigit() for value in found.values()):
        return {c: int(found[key]) for c, key in zip(choices, keys, strict=True)}, True
    stored = get_or_set(f"polls:{poll_id}:db-totals", lambda: list(db_totals(poll_id).items()), ttl=1)
    return {int(c): n for c, n in stored}, False

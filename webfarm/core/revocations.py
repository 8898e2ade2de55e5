"""Copies in memcached superseded by a change the database knows of.

Anyone who can reach memcached can write back an old copy of a sealed value
under its own key: a user from before they lost staff, a session from before
its logout. memcached alone cannot tell that copy from the newest one (every
key of it can be rolled back), so the change is written where memcached's
writers cannot reach: a Revocation row (key, time). Each process reads the
rows written since it last looked, at most once every REFRESH seconds, and a
sealed copy of that key made before the revocation is refused from then on.

The cost: one small query per process per REFRESH seconds, and only in a
process that reads a revocable copy (a request with a session); a change is
known farm-wide within REFRESH seconds. The database being away leaves the
revocations already known in force.
"""

import logging
import threading
import time

from django.db import DatabaseError

from webfarm.core.models import Revocation
from webfarm.core.seal import CLOCK_SLACK, Unsealed, stamp_of, unseal_stamped
from webfarm.core.tampering import refused

logger = logging.getLogger(__name__)

REFRESH = 1.0
# Rows read again below the newest id seen: a row whose id was handed out
# before a newer one's, but committed after it, is still found.
RECHECK = 32


class _Known:
    def __init__(self) -> None:
        self.lock = threading.Lock()
        self.read_at = float("-inf")  # monotonic
        self.last_id = 0
        self.revoked: dict[str, tuple[float, float]] = {}  # key: (at, until)

    def note(self, key: str, at: float, until: float) -> None:
        current = self.revoked.get(key)
        if current is None or current[0] < at:
            self.revoked[key] = (at, until)

    def refresh(self) -> None:
        now = time.time()
        rows = Revocation.objects.filter(id__gt=self.last_id - RECHECK, until__gt=now)
        for row_id, key, at, until in rows.values_list("id", "key", "at", "until"):
            self.note(key, at, until)
            self.last_id = max(self.last_id, row_id)
        self.revoked = {key: seen for key, seen in self.revoked.items() if seen[1] > now}

    def revoked_at(self, key: str) -> float | None:
        with self.lock:
            if time.monotonic() - self.read_at >= REFRESH:
                self.read_at = time.monotonic()
                try:
                    self.refresh()
                except DatabaseError as exc:
                    logger.warning("revocations not read (the ones known stay in force): %s", exc)
            seen = self.revoked.get(key)
        return None if seen is None else seen[0]


_known = _Known()


def revoke(key: str, *, lasts: float) -> None:
    """Every copy of `key` made until now is superseded. `lasts`: the longest
    such a copy may live (its family's lifetime). Raises DatabaseError."""
    now = time.time()
    until = now + lasts + 2 * CLOCK_SLACK
    Revocation.objects.filter(until__lt=now).delete()
    Revocation.objects.create(key=key, at=now, until=until)
    with _known.lock:
        _known.note(key, now, until)


def superseded(key: str, made: float) -> bool:
    """Whether a copy of `key` made at `made` (the writer's clock) was revoked
    since. A copy made up to CLOCK_SLACK after a revocation counts as before
    it: the clocks of two nodes may be that far apart."""
    revoked_at = _known.revoked_at(key)
    return revoked_at is not None and made <= revoked_at + CLOCK_SLACK


def unseal_current(family: str, key: str, raw: bytes | None, ended: str) -> Unsealed | None:
    """The value sealed under `key` (webfarm.core.seal.unseal_stamped), or
    None when it is not, or when the copy was made before a revocation of
    its key (refused, saying what `ended` it)."""
    found = unseal_stamped(family, key, raw)
    if found is None:
        return None
    if superseded(key, found.made):
        refused(family, key, f"superseded: {ended} since")
        return None
    return found


def forget_known(*, refreshed: bool = False) -> None:
    """Start again from the database (tests whose database was rolled back);
    `refreshed`: as if it had just been read (and found empty)."""
    global _known
    _known = _Known()
    if refreshed:
        _known.read_at = time.monotonic()


# CheckedCopies.known's answer for bytes it has not checked.
UNCHECKED = object()


class CheckedCopies:
    """What a reader made of sealed copies it read before (unseal_current,
    then its own parse), by key. The same bytes read again under the same
    key carry the same MAC and value, so they are not checked and parsed
    again; their lifetime and the revocations are looked at on every read,
    as unseal_current does. For a reader that reads the same few copies over
    and over (the poll lanes: each user's session and user, every second or
    two). Bounded: past `most` keys, it forgets them all and learns again."""

    def __init__(self, most: int) -> None:
        self.most = most
        self._known: dict[str, tuple[bytes, float, float, object]] = {}

    def known(self, key: str, raw: bytes | None) -> object:
        """What was made of `raw` under `key` before, or UNCHECKED (then the
        caller checks it: unseal_current refuses, and logs, what is not current)."""
        seen = self._known.get(key)
        if raw is None or seen is None or seen[0] != raw:
            return UNCHECKED
        _, made, lapses, parsed = seen
        if time.time() > lapses + CLOCK_SLACK or superseded(key, made):
            self._known.pop(key, None)
            return UNCHECKED
        return parsed

    def remember(self, key: str, raw: bytes | None, parsed: object) -> None:
        """`parsed`: what the caller made of `raw`, a current copy unseal_current
        accepted under `key` (shared with later readers: never changed)."""
        stamp = stamp_of(raw)
        if raw is None or stamp is None or parsed is None:
            return
        if len(self._known) >= self.most:
            self._known.clear()
        self._known[key] = (raw, *stamp, parsed)

"""Sessions in the database, cached in memcached without trusting memcached.

SESSION_ENGINE = "webfarm.core.sessions". Django's cached_db keeps the session
under its own id as the key and the plain data as the value, so anyone who
can reach memcached (no authentication) could list every session id and log
in as anyone, or plant data for a session. Here:

* the key is an HMAC of the session id (keyed by SECRET_KEY): the ids never
  reach memcached, and the key of a given id cannot be made without the secret;
* the value is sealed (webfarm.core.seal: a MAC over the key, its times and
  its JSON), so it is bound to its session: a planted or moved value fails
  the check and the session is read from the database instead;
* a cached copy lives SESSION_CACHE_TTL seconds at most, not the session's
  two weeks: an active user costs one query per period, and logins do not pin
  memory in a memcached that runs with -M. The seal dates it, so an old copy
  written back is refused once its lifetime is over, and an ended session (a
  logout, a new key at login) is revoked (webfarm.core.revocations): a copy
  made before the end is refused on every node within a second;
* a session id that Django could not have made (wrong length or alphabet, a
  NUL byte) is no session: it reaches neither memcached nor the database.

The copy is read and written with the farm's own client (webfarm.core.client),
not Django's cache: one round trip at the client's cost, and the same key
family as the farm's other sealed copies (`<namespace>:session:<HMAC>`).
"""

import json
import logging
import string
import time
from typing import TYPE_CHECKING, Any, cast

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.sessions.backends import db
from django.db.models.signals import post_delete
from django.utils import timezone
from django.utils.crypto import salted_hmac
from pymemcache.exceptions import MemcacheError

from webfarm.core import conf
from webfarm.core.client import get_client
from webfarm.core.revocations import revoke, unseal_current
from webfarm.core.seal import seal
from webfarm.core.tampering import refused

logger = logging.getLogger(__name__)

# SESSION_ENGINE's value for this engine.
ENGINE = __name__
KEY_SALT = "webfarm.core.sessions.cache-key"
SESSION_KEY_LENGTH = 32  # what SessionBase._get_new_session_key makes
# Sessions made before users were cached (webfarm.core.users) name Django's backend.
_ALPHABET = frozenset(string.ascii_lowercase + string.digits)
_UNREACHABLE = (MemcacheError, OSError)
_UNREAD = object()


def longest_copy() -> int:
    """SESSION_CACHE_TTL: seconds a copy lives at most. A project that installs
    this engine need not set it (the demo site reads it from the environment)."""
    return int(getattr(settings, "SESSION_CACHE_TTL", conf.SESSION_CACHE_TTL))


def cache_ttl(expiry_age: int) -> int:
    return max(1, min(int(expiry_age), longest_copy()))


def copy_key(session_key: str) -> str:
    """The key of a session's cached copy."""
    digest = salted_hmac(KEY_SALT, session_key, algorithm="sha256").hexdigest()[:40]
    return SessionStore.cache_key_prefix + digest


def _deleted(sender: type, instance: Any, **kwargs: Any) -> None:
    """A session row deleted, however (a logout, the admin, a queryset's
    delete(), which sends this for every row while someone listens): its
    copies are revoked and the cached one dropped. An expired one's copies
    lapsed with it (a copy lives no longer than its session)."""
    if instance.expire_date <= timezone.now():
        return
    key = copy_key(instance.session_key)
    revoke(key, lasts=longest_copy())
    try:
        get_client().delete(key)
    except _UNREACHABLE:
        logger.warning("cached session not dropped (revoked all the same)", exc_info=True)


def connect_signals() -> None:
    post_delete.connect(_deleted, sender=SessionStore.get_model_class(), dispatch_uid="webfarm.core.sessions")


class SessionStore(db.SessionStore):
    cache_key_prefix = "session:"

    if TYPE_CHECKING:  # Django's own, which its stubs leave out
        _session: dict[str, Any]

        def _get_or_create_session_key(self) -> str: ...
        async def _aget_or_create_session_key(self) -> str: ...
        def _get_session_from_db(self) -> Any: ...

    def _validate_session_key(self, key: object) -> bool:
        return isinstance(key, str) and len(key) == SESSION_KEY_LENGTH and all(c in _ALPHABET for c in key)

    def _key_for(self, session_key: str) -> str:
        # Kept for the instance's own key: a poll asks for it twice.
        known = self.__dict__.get("_copy_key")
        if known is None or known[0] != session_key:
            known = self._copy_key = (session_key, copy_key(session_key))
        return known[1]

    @property
    def cache_key(self) -> str:
        return self._key_for(self._get_or_create_session_key())

    async def acache_key(self) -> str:
        return self._key_for(await self._aget_or_create_session_key())

    # -- reading and writing the cached copy ------------------------------------

    def _from_cache(self, key: str) -> dict[str, Any] | None:
        try:
            raw = get_client().get(key)
        except _UNREACHABLE:
            return None
        return cached_copy(key, raw)

    def _to_cache(self, key: str, data: dict[str, Any], ttl: int, made: float | None = None) -> None:
        value = seal(key, json.dumps(data, separators=(",", ":")).encode(), ttl=ttl, made=made)
        try:
            get_client().set(key, value, expire=ttl)
        except _UNREACHABLE:
            logger.warning("session not cached (memcached unreachable?)", exc_info=True)

    def cached_data(self, raw: object = _UNREAD) -> dict[str, Any] | None:
        """The session's data from memcached alone, or None when only the
        database can tell (no copy, a refused one, no valid session key).
        `raw`: the value under cache_key, if the caller read it already."""
        session_key = self.session_key  # None unless _validate_session_key passed
        if session_key is None:
            return None
        key = self._key_for(session_key)
        return self._from_cache(key) if raw is _UNREAD else cached_copy(key, cast("bytes | None", raw))

    def load(self) -> dict[str, Any]:
        session_key = self._get_or_create_session_key()
        key = self._key_for(session_key)
        data = self._from_cache(key)
        if data is not None:
            return data
        made = time.time()  # before the read: a logout committed meanwhile supersedes this copy
        row = self._get_session_from_db()
        if row is None:
            return {}
        data = self.decode(row.session_data)
        self._to_cache(key, data, cache_ttl(self.get_expiry_age(expiry=row.expire_date)), made)
        return data

    async def aload(self) -> dict[str, Any]:
        return await sync_to_async(self.load)()

    def save(self, must_create: bool = False) -> None:
        # The database first, then the sealed copy.
        super().save(must_create)
        key = self._key_for(self._get_or_create_session_key())  # the key saved: never a new one here
        self._to_cache(key, self._session, cache_ttl(self.get_expiry_age()))

    async def asave(self, must_create: bool = False) -> None:
        await sync_to_async(self.save)(must_create)

    def exists(self, session_key: str) -> bool:
        if not self._validate_session_key(session_key):
            return False
        try:
            if get_client().get(self._key_for(session_key)) is not None:
                return True
        except _UNREACHABLE:
            pass
        return super().exists(session_key)

    async def aexists(self, session_key: str) -> bool:
        return await sync_to_async(self.exists)(session_key)

    def delete(self, session_key: str | None = None) -> None:
        # The row's deletion revokes its copies and drops the cached one (_deleted).
        super().delete(session_key)

    async def adelete(self, session_key: str | None = None) -> None:
        await sync_to_async(self.delete)(session_key)


def cached_copy(key: str, raw: bytes | None) -> dict[str, Any] | None:
    """The data in `raw`, a session's cached copy read under `key` (its
    SessionStore's cache_key), or None: not a current copy of ours."""
    found = unseal_current("session", key, raw, "the session ended")
    if found is None:
        return None
    try:
        data = json.loads(found.value)
    except (ValueError, RecursionError):
        data = None
    if not isinstance(data, dict):
        refused("session", key, "not a session")
        return None
    return data

"""Sessions in the database, cached in memcached without trusting memcached.

SESSION_ENGINE = "webfarm.core.sessions". Django's cached_db keeps the session
under its own id as the key and the plain data as the value, so anyone who
can reach memcached (no authentication) could list every session id and log
in as anyone, or plant data for a session. Here:

* the key is an HMAC of the session id (keyed by SECRET_KEY): the ids never
  reach memcached, and the key of a given id cannot be made without the secret;
* the value is signed, bound to the session id, and JSON: a planted or moved
  value fails the check and the session is read from the database instead;
* a cached copy lives SESSION_CACHE_TTL seconds at most, not the session's
  two weeks: an active user costs one query per period, and logins do not pin
  memory in a memcached that runs with -M. The signature dates it, so an old
  copy written back is refused once that time is over, and an ended session
  (a logout, a new key at login) is revoked (webfarm.core.revocations): a copy made
  before the end is refused on every node within a second;
* a session id that Django could not have made (wrong length or alphabet, a
  NUL byte) is no session: it reaches neither memcached nor the database.
"""

import logging
import string
import time
from typing import Any

from asgiref.sync import sync_to_async
from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY
from django.contrib.sessions.backends import cached_db
from django.core import signing
from django.utils.crypto import salted_hmac

from webfarm.core.revocations import revoke, superseded
from webfarm.core.seal import CLOCK_SLACK
from webfarm.core.tampering import refused

logger = logging.getLogger(__name__)

KEY_SALT = "webfarm.core.sessions.cache-key"
VALUE_SALT = "webfarm.core.sessions.cache-value:"
SESSION_KEY_LENGTH = 32  # what SessionBase._get_new_session_key makes
# Sessions made before users were cached (webfarm.core.users) name Django's backend.
MODEL_BACKEND = "django.contrib.auth.backends.ModelBackend"
CACHED_BACKEND = "webfarm.core.users.CachedUserBackend"
_ALPHABET = frozenset(string.ascii_lowercase + string.digits)


def cache_ttl(expiry_age: int) -> int:
    return max(1, min(int(expiry_age), int(settings.SESSION_CACHE_TTL)))


class SessionStore(cached_db.SessionStore):
    cache_key_prefix = "session:"

    def _validate_session_key(self, key: object) -> bool:
        return isinstance(key, str) and len(key) == SESSION_KEY_LENGTH and all(c in _ALPHABET for c in key)

    def _key_for(self, session_key: str) -> str:
        return self.cache_key_prefix + salted_hmac(KEY_SALT, session_key, algorithm="sha256").hexdigest()[:40]

    @property
    def cache_key(self) -> str:
        return self._key_for(self._get_or_create_session_key())

    async def acache_key(self) -> str:
        return self._key_for(await self._aget_or_create_session_key())

    # -- reading and writing the cached copy ------------------------------------

    def _from_cache(self, key: str, session_key: str) -> dict[str, Any] | None:
        try:
            raw = self._cache.get(key)
        except Exception:
            return None
        if raw is None:
            return None
        try:
            if not isinstance(raw, str):
                raise signing.BadSignature("not a signed string")
            copy = signing.loads(
                raw,
                salt=VALUE_SALT + session_key,
                serializer=self.serializer,
                max_age=int(settings.SESSION_CACHE_TTL) + CLOCK_SLACK,
            )
            if not (isinstance(copy, dict) and isinstance(copy.get("data"), dict)):
                raise signing.BadSignature("not a session")
            made = copy.get("made")
            if not isinstance(made, int | float) or superseded(key, made):
                raise signing.BadSignature("superseded: the session ended since")
        except signing.BadSignature as exc:  # SignatureExpired too: an old copy written back
            refused("session", key, str(exc) or "bad signature")
            return None
        return copy["data"]

    def _to_cache_value(self, data: dict[str, Any], session_key: str, made: float | None = None) -> str:
        copy = {"made": time.time() if made is None else made, "data": data}
        return signing.dumps(copy, salt=VALUE_SALT + session_key, serializer=self.serializer)

    def load(self) -> dict[str, Any]:
        session_key = self._get_or_create_session_key()
        key = self._key_for(session_key)
        data = self._from_cache(key, session_key)
        if data is None:
            made = time.time()  # before the read: a logout committed meanwhile supersedes this copy
            row = self._get_session_from_db()
            if row is None:
                return {}
            data = self.decode(row.session_data)
            try:
                ttl = cache_ttl(self.get_expiry_age(expiry=row.expire_date))
                self._cache.set(key, self._to_cache_value(data, session_key, made), ttl)
            except Exception:
                logger.warning("session not cached (memcached unreachable?)", exc_info=True)
        return _upgraded(data)

    async def aload(self) -> dict[str, Any]:
        return await sync_to_async(self.load)()

    def save(self, must_create: bool = False) -> None:
        # The database first (DBStore.save), then the signed copy.
        super(cached_db.SessionStore, self).save(must_create)
        try:
            session_key = self.session_key
            self._cache.set(
                self._key_for(session_key),
                self._to_cache_value(self._session, session_key),
                cache_ttl(self.get_expiry_age()),
            )
        except Exception:
            logger.warning("session not cached (memcached unreachable?)", exc_info=True)

    async def asave(self, must_create: bool = False) -> None:
        await sync_to_async(self.save)(must_create)

    def exists(self, session_key: str) -> bool:
        if not self._validate_session_key(session_key):
            return False
        return self._key_for(session_key) in self._cache or super(cached_db.SessionStore, self).exists(
            session_key
        )

    async def aexists(self, session_key: str) -> bool:
        return await sync_to_async(self.exists)(session_key)

    def delete(self, session_key: str | None = None) -> None:
        super(cached_db.SessionStore, self).delete(session_key)
        if session_key is None:
            if self.session_key is None:
                return
            session_key = self.session_key
        if self._validate_session_key(session_key):
            key = self._key_for(session_key)
            revoke(key, lasts=int(settings.SESSION_CACHE_TTL))
            self._cache.delete(key)

    async def adelete(self, session_key: str | None = None) -> None:
        await sync_to_async(self.delete)(session_key)


def _upgraded(data: dict[str, Any]) -> dict[str, Any]:
    """A session logged in through Django's ModelBackend, before the cached
    backend replaced it, stays logged in (the same users, read through the
    cache) instead of being logged out by the upgrade."""
    backends = settings.AUTHENTICATION_BACKENDS
    if (
        data.get(BACKEND_SESSION_KEY) == MODEL_BACKEND
        and MODEL_BACKEND not in backends
        and CACHED_BACKEND in backends
    ):
        data[BACKEND_SESSION_KEY] = CACHED_BACKEND
    return data

"""Users cached in memcached, so a request whose session is cached costs no query.

    AUTHENTICATION_BACKENDS = ["webfarm.core.users.CachedUserBackend"]

Django's ModelBackend reads the user from the database on every request that
looks at request.user. This backend reads `user:<id>.<key id>` first: the
fields requests use (USER_FIELDS) and the session auth hash, sealed
(webfarm.core.seal), so a planted or moved value reads as a miss and the user comes
from the database. The password hash is never cached: the session auth hash
is an HMAC of it that every session already carries. Other fields are
deferred: the first access reads them from the database.

A user saved or deleted on any node is dropped at once and revoked
(webfarm.core.revocations): a copy made before the change, whether a reader that
loaded the old row caches it afterwards or someone who can reach memcached
writes an old copy back, is refused on every node within a second.
`QuerySet.update()` sends no signal: what it changes is seen within
USER_CACHE_TTL. The key names the signing key, so a rotated
DJANGO_SECRET_KEY never reads entries sealed with the old one.

`user_with(request, keys)` reads the request's user and other keys in one
round trip after the session's: a poll with a session costs two.
webfarm.progress.pollgate's session lane reads the session, the user and the record
in one (snapshot_fields: no database, no model instance).
"""

import contextvars
import functools
import hashlib
import json
import logging
import time
from collections.abc import Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, SESSION_KEY, get_user_model
from django.contrib.auth.backends import ModelBackend
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.signals import setting_changed
from django.db import DEFAULT_DB_ALIAS, transaction
from django.db.models.signals import post_delete, post_save
from django.dispatch import receiver
from django.http import HttpRequest
from django.utils.module_loading import import_string
from pymemcache.exceptions import MemcacheError

from webfarm.core import conf
from webfarm.core.client import get_client
from webfarm.core.revocations import revoke, unseal_current
from webfarm.core.seal import seal, secrets_in_use
from webfarm.core.tampering import refused

logger = logging.getLogger(__name__)

BACKEND = "webfarm.core.users.CachedUserBackend"
# What requests read of request.user (templates, permission checks, limits).
USER_FIELDS = ("username", "is_active", "is_staff", "is_superuser")
_prefetched: contextvars.ContextVar[dict[str, bytes | None] | None] = contextvars.ContextVar(
    "core_users_prefetched", default=None
)


def cache_key(user_id: object) -> str:
    key_id = hashlib.blake2b(secrets_in_use()[0], digest_size=4, person=b"user-cache").hexdigest()
    return f"user:{user_id}.{key_id}"


def cache_ttl() -> int:
    """USER_CACHE_TTL: seconds a copy lives. A project that installs this
    backend need not set it (the demo site reads it from the environment)."""
    return int(getattr(settings, "USER_CACHE_TTL", conf.USER_CACHE_TTL))


def _snapshot(user: AbstractBaseUser) -> bytes:
    data = {name: getattr(user, name) for name in USER_FIELDS}
    data["pk"] = user.pk
    data["auth"] = user.get_session_auth_hash()
    return json.dumps(data, separators=(",", ":")).encode()


def snapshot_fields(user_id: object, raw: bytes | None) -> dict[str, Any] | None:
    """What a cached value says of the user (their `pk`, USER_FIELDS and the
    session `auth` hash), or None (missing, refused, superseded). For a
    reader that needs no model instance (webfarm.progress.pollgate)."""
    key = cache_key(user_id)
    found = unseal_current("user", key, raw, "the user changed")
    if found is None:
        return None
    try:
        data = json.loads(found.value)
        if not isinstance(data, dict) or str(data["pk"]) != str(user_id) or not isinstance(data["auth"], str):
            raise ValueError("not this user's")
        return {"pk": data["pk"], "auth": data["auth"], **{name: data[name] for name in USER_FIELDS}}
    except (ValueError, KeyError, TypeError, RecursionError) as exc:
        refused("user", key, str(exc))
        return None


def _from_snapshot(user_id: object, raw: bytes | None) -> AbstractBaseUser | None:
    """The user a cached value describes, or None (missing, refused, superseded)."""
    data = snapshot_fields(user_id, raw)
    if data is None:
        return None
    model = get_user_model()
    cached = {model._meta.pk.attname: data["pk"], **{name: data[name] for name in USER_FIELDS}}
    # In the model's field order; the rest deferred (read from the database if anything asks).
    names = [f.attname for f in model._meta.concrete_fields if f.attname in cached]
    user = model.from_db(DEFAULT_DB_ALIAS, names, [cached[name] for name in names])
    auth = data["auth"]
    # The password hash itself stays deferred.
    user.get_session_auth_hash = lambda: auth  # type: ignore[method-assign]
    return user


def _from_database(user_id: Any) -> AbstractBaseUser | None:
    model = get_user_model()
    try:
        return model._default_manager.get(pk=user_id)
    except (model.DoesNotExist, ValueError, TypeError):
        return None


def cached_user(user_id: object) -> AbstractBaseUser | None:
    """The user with this id: from memcached, else from the database (then cached)."""
    prefetched = _prefetched.get()
    key = cache_key(user_id)
    try:
        raw = prefetched[str(user_id)] if prefetched and str(user_id) in prefetched else get_client().get(key)
    except (MemcacheError, OSError) as exc:
        logger.debug("user %s read from the database: %s", user_id, exc)
        return _from_database(user_id)
    user = _from_snapshot(user_id, raw)
    if user is not None:
        return user
    made = time.time()  # before the read: a change committed meanwhile supersedes this copy
    user = _from_database(user_id)
    if user is not None:
        value = seal(key, _snapshot(user), ttl=cache_ttl(), made=made)
        try:
            # A refused copy is replaced; else add, so a copy cached meanwhile stays.
            client = get_client()
            (client.set if raw is not None else client.add)(key, value, expire=cache_ttl())
        except (MemcacheError, OSError) as exc:
            logger.debug("user %s not cached: %s", user_id, exc)
    return user


def forget(user_id: object) -> None:
    """The user changed: every node reads them from the database again, and
    no copy made before now is believed (not even one written back)."""
    key = cache_key(user_id)
    revoke(key, lasts=cache_ttl())
    try:
        get_client().delete(key)
    except (MemcacheError, OSError) as exc:
        logger.warning("cached user %s not dropped (revoked all the same): %s", user_id, exc)


def _changed(sender: type, instance: AbstractBaseUser, **kwargs: Any) -> None:
    fields = kwargs.get("update_fields")
    if kwargs.get("created") or (fields is not None and not set(fields) & {*USER_FIELDS, "password"}):
        return  # nothing cached changed (a login saves last_login alone)
    user_id = instance.pk
    forget(user_id)
    # Again once the change is visible to other connections: a copy of the
    # old row read before the commit is superseded even if cached after it.
    transaction.on_commit(lambda: forget(user_id))


def connect_signals() -> None:
    model = get_user_model()
    post_save.connect(_changed, sender=model, dispatch_uid="webfarm.core.users.saved")
    post_delete.connect(_changed, sender=model, dispatch_uid="webfarm.core.users.deleted")


class CachedUserBackend(ModelBackend):
    """ModelBackend, reading users from memcached when it can."""

    # The stubs read AUTH_USER_MODEL from mypy's settings; a project's may be any AbstractBaseUser.
    def get_user(self, user_id: object) -> AbstractBaseUser | None:  # type: ignore[override]
        user = cached_user(user_id)
        return user if user is not None and self.user_can_authenticate(user) else None  # type: ignore[arg-type]


@functools.cache
def is_cached_backend(path: object) -> bool:
    """Whether a session's backend path names this backend or a subclass
    (webfarm.limits.backends.ThrottledUserBackend): its users are cached."""
    if not isinstance(path, str) or path not in settings.AUTHENTICATION_BACKENDS:
        return False
    try:
        backend = import_string(path)
    except ImportError:
        return False
    return isinstance(backend, type) and issubclass(backend, CachedUserBackend)


@receiver(setting_changed)
def _backends_changed(*, setting: str, **kwargs: Any) -> None:
    if setting == "AUTHENTICATION_BACKENDS":
        is_cached_backend.cache_clear()


def user_with(request: HttpRequest, keys: Iterable[str]) -> tuple[Any, dict[str, bytes] | None]:
    """request.user and the raw values of `keys` (the namespace's keys, as
    for get_client()), read together: the session's round trip, then one for
    the user and the keys. The values are None when they were not read
    (nobody is logged in with this backend, or memcached failed): the caller
    reads them its own way."""
    keys = list(keys)
    user_id = request.session.get(SESSION_KEY)
    if user_id is None or not is_cached_backend(request.session.get(BACKEND_SESSION_KEY)) or not keys:
        return request.user, None
    user_key = cache_key(user_id)
    try:
        found = get_client().get_many([user_key, *keys])
    except (MemcacheError, OSError) as exc:
        logger.debug("user and keys not read together: %s", exc)
        return request.user, None
    token = _prefetched.set({str(user_id): found.get(user_key)})
    try:
        user = request.user
        user.is_authenticated  # noqa: B018 (resolves the lazy user while the read is at hand)
    finally:
        _prefetched.reset(token)
    return user, {key: found[key] for key in keys if key in found}


def cached_fields(user_id: object) -> dict[str, Any] | None:
    """What memcached holds of the user (snapshot_fields), with no database.
    Raises MemcacheError or OSError when memcached fails."""
    return snapshot_fields(user_id, get_client().get(cache_key(user_id)))

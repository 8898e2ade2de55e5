"""Values this farm writes to memcached and reads back, sealed with a MAC.

memcached has no authentication: anything there may have been written by
someone else. A sealed value carries a keyed BLAKE2b MAC over the memcached
key it lives under and its bytes, keyed by DJANGO_SECRET_KEY, so a planted
value, or one of ours copied under another key, fails `unseal` and reads as
missing (the reader then falls back as after a memcached restart). The MAC
is 16 bytes in front of the value; computing it costs about a microsecond.

Values stay readable JSON after the MAC (memcached tools still show them).
SECRET_KEY_FALLBACKS are accepted on reading, so a key rotation does not
drop what is in memcached.
"""

import hashlib
import hmac
from functools import cache

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from core.tampering import refused

MAC_BYTES = 16
PERSON = b"webfarm-seal"


@cache
def secrets_in_use() -> tuple[bytes, ...]:
    """The MAC keys: from SECRET_KEY first (the one that signs), then its fallbacks."""
    secrets = [settings.SECRET_KEY, *getattr(settings, "SECRET_KEY_FALLBACKS", [])]
    return tuple(hashlib.blake2b(s.encode(), person=PERSON, digest_size=32).digest() for s in secrets)


@receiver(setting_changed)
def _secret_changed(*, setting: str, **kwargs: object) -> None:
    if setting in ("SECRET_KEY", "SECRET_KEY_FALLBACKS"):
        secrets_in_use.cache_clear()


def mac(key: str, value: bytes, secret: bytes | None = None) -> bytes:
    digest = hashlib.blake2b(key.encode(), key=secret or secrets_in_use()[0], digest_size=MAC_BYTES)
    digest.update(b"\0")
    digest.update(value)
    return digest.digest()


def verify_mac(key: str, value: bytes, tag: bytes) -> bool:
    """Whether `tag` is the MAC of `value` under `key` by any secret in use."""
    return any(hmac.compare_digest(tag, mac(key, value, secret)) for secret in secrets_in_use())


def seal(key: str, value: bytes) -> bytes:
    """`value` as stored under `key` (the key without the namespace)."""
    return mac(key, value) + value


def unseal(family: str, key: str, raw: bytes | None) -> bytes | None:
    """The value sealed under `key`, or None when there is none or it was not
    sealed here for this key (then it is logged and counted as refused)."""
    if raw is None:
        return None
    if len(raw) >= MAC_BYTES:
        tag, value = raw[:MAC_BYTES], raw[MAC_BYTES:]
        for secret in secrets_in_use():
            if hmac.compare_digest(tag, mac(key, value, secret)):
                return value
    refused(family, key, "bad seal")
    return None

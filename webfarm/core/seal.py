"""Values this farm writes to memcached and reads back, sealed with a MAC.

memcached has no authentication: anything there may have been written by
someone else. A sealed value carries a keyed BLAKE2b MAC over the memcached
key it lives under, the times it was made and lapses, and its bytes, keyed
by DJANGO_SECRET_KEY. So:

* a planted value, or one of ours copied under another key, fails `unseal`
  and reads as missing (the reader then falls back as after a memcached
  restart);
* an old copy written back under its own key (a replay) is refused once the
  lifetime it was written with is over, whatever expiry it was written back
  with;
* a copy made before its data changed is refused as soon as the change is
  known (`webfarm.core.revocations`: the readers that pass `family` of a revocable
  kind ask whether it is superseded).

Layout: 16 bytes of MAC, then the made and lapses times in milliseconds as
13 ASCII digits each, then the value. Values stay readable JSON after them
(memcached tools still show them); computing the MAC costs about a
microsecond. SECRET_KEY_FALLBACKS are accepted on reading, so a key rotation
does not drop what is in memcached.
"""

import hashlib
import hmac
import time
from dataclasses import dataclass
from functools import cache

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver

from webfarm.core.tampering import refused

MAC_BYTES = 16
STAMP_DIGITS = 13
HEADER_BYTES = MAC_BYTES + 2 * STAMP_DIGITS
PERSON = b"webfarm-seal"
# How far apart the farm's clocks may be: a value is read this long past the
# end of its lifetime (memcached itself keeps time in whole seconds).
CLOCK_SLACK = 2.0


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


def seal(key: str, value: bytes, *, ttl: float, made: float | None = None) -> bytes:
    """`value` as stored under `key` (the key without the namespace) for `ttl`
    seconds. `made`: when its data was read (default now); a copy of a row
    read before the row changed is superseded even if written after."""
    made = time.time() if made is None else made
    stamp = b"%013d%013d" % (int(made * 1000), int((made + ttl) * 1000))
    return mac(key, stamp + value) + stamp + value


@dataclass(frozen=True)
class Unsealed:
    value: bytes
    made: float  # Unix time, as the writer's clock had it
    lapses: float


def unseal_stamped(family: str, key: str, raw: bytes | None, *, now: float | None = None) -> Unsealed | None:
    """The value sealed under `key` with its times, or None when there is none,
    it was not sealed here for this key, or its lifetime is over (a refusal
    is logged and counted)."""
    if raw is None:
        return None
    if len(raw) >= HEADER_BYTES:
        tag, stamped = raw[:MAC_BYTES], raw[MAC_BYTES:]
        if verify_mac(key, stamped, tag):
            stamp = stamped[: 2 * STAMP_DIGITS]
            made, lapses = int(stamp[:STAMP_DIGITS]) / 1000, int(stamp[STAMP_DIGITS:]) / 1000
            if (time.time() if now is None else now) > lapses + CLOCK_SLACK:
                refused(family, key, "lifetime over (an old copy written back)")
                return None
            return Unsealed(stamped[2 * STAMP_DIGITS :], made, lapses)
    refused(family, key, "bad seal")
    return None


def stamp_of(raw: bytes | None) -> tuple[float, float] | None:
    """When a sealed value was made and when its lifetime is over, read from
    its stamp without checking its MAC (for values checked before)."""
    if raw is None or len(raw) < HEADER_BYTES:
        return None
    stamp = raw[MAC_BYTES:HEADER_BYTES]
    try:
        return int(stamp[:STAMP_DIGITS]) / 1000, int(stamp[STAMP_DIGITS:]) / 1000
    except ValueError:
        return None


def unseal(family: str, key: str, raw: bytes | None) -> bytes | None:
    """The value sealed under `key`, or None (see unseal_stamped)."""
    found = unseal_stamped(family, key, raw)
    return None if found is None else found.value


# A JSON object sealed in place ends with its MAC as a last member: nginx
# serves it as it is and browsers ignore the member, while the farm can tell
# an object of ours from a planted one. No stamp: its lifetime is memcached's.
SEAL_MEMBER = b',"seal":"'
_SEAL_SUFFIX = len(SEAL_MEMBER) + 2 * MAC_BYTES + len(b'"}')


def seal_json(key: str, body: bytes) -> bytes:
    """`body`, a compact JSON object, with its MAC under `key` as a last member "seal"."""
    return body[:-1] + SEAL_MEMBER + mac(key, body).hex().encode() + b'"}'


def unseal_json(key: str, raw: bytes) -> bytes | None:
    """The JSON object seal_json sealed, without its seal; None if it is not sealed for `key`."""
    if len(raw) <= _SEAL_SUFFIX or raw[-_SEAL_SUFFIX : -_SEAL_SUFFIX + len(SEAL_MEMBER)] != SEAL_MEMBER:
        return None
    try:
        tag = bytes.fromhex(raw[-_SEAL_SUFFIX + len(SEAL_MEMBER) : -2].decode("ascii"))
    except ValueError:
        return None
    body = raw[:-_SEAL_SUFFIX] + b"}"
    return body if verify_mac(key, body, tag) else None

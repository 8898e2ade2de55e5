"""The web, worker and beat processes refuse to start on a placeholder or weak secret.

DJANGO_SECRET_KEY signs sessions, vote cookies and everything this farm reads
back from memcached (webfarm.core.seal, queue entries). With the built-in
development key, or the example environment file's placeholder, anyone could
forge those; a short one (under MIN_LENGTH characters, or fewer than
MIN_UNIQUE different ones) can be guessed. With DEBUG off such a process
stops at once, saying why.

When DJANGO_SECRET_KEY is unset, the settings read this machine's own key
(var/secret_key, made on first use), so `make run`, every manage.py command
and a celery started by hand agree. That key is this machine's alone: a
process whose memcached, database or broker is on another machine refuses
to start on it, since the farm's other machines would each have their own.
"""

import ipaddress
import sys
from urllib.parse import urlsplit

from django.conf import settings

# The example environment file's value (deploy/webfarm.env.example).
EXAMPLE_PLACEHOLDER = "change-me-to-50-random-characters"
# 128 random bits written in hex are 32 characters; Django's own check wants 5 different ones.
MIN_LENGTH = 32
MIN_UNIQUE = 5


def placeholder_in_use() -> bool:
    """Whether the key is missing, a placeholder, or too weak to keep the farm's secrets."""
    key = settings.SECRET_KEY
    return (
        not key
        or key in {settings.DEV_SECRET_KEY, EXAMPLE_PLACEHOLDER}
        or len(key) < MIN_LENGTH
        or len(set(key)) < MIN_UNIQUE
    )


def _is_local(host: str) -> bool:
    host = host.strip().strip("[]")
    if not host or host == "localhost" or host.startswith("/"):  # a Unix socket is on this machine
        return True
    try:
        return ipaddress.ip_address(host).is_loopback
    except ValueError:
        return False


def other_machines() -> list[str]:
    """The hosts of memcached, the database and the broker that are not this machine."""
    hosts = [server.rsplit(":", 1)[0] for server in settings.MEMCACHED["SERVERS"]]
    hosts += [str(settings.DATABASES["default"].get("HOST") or "")]
    broker = settings.CELERY_BROKER_TRANSPORT_OPTIONS.get("servers") or []
    hosts += [server.rsplit(":", 1)[0] for server in broker]
    if not str(settings.CELERY_BROKER_URL).startswith(("memcached://", "memory://")):
        hosts.append(urlsplit(str(settings.CELERY_BROKER_URL)).hostname or "")
    return sorted({host for host in hosts if not _is_local(host)})


def refuse_placeholder(process: str) -> None:
    """Stop this process (SystemExit) if it would run in production on a
    placeholder key, or on this machine's own key in a farm of several."""
    if settings.DEBUG:
        return
    elsewhere = other_machines() if getattr(settings, "SECRET_KEY_FROM_FILE", False) else []
    if elsewhere and not placeholder_in_use():
        print(
            f"webfarm {process}: refusing to start: DJANGO_SECRET_KEY is not set, and this farm is not "
            f"on this machine alone ({', '.join(elsewhere)}): every machine would use a key of its own. "
            "Set it to the same long random value on every machine.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(3)
    if not placeholder_in_use():
        return
    print(
        f"webfarm {process}: refusing to start: DJANGO_SECRET_KEY is not set, is a placeholder, "
        f"or is shorter than {MIN_LENGTH} characters, and DJANGO_DEBUG is off. "
        "Set it to the same long random value on every machine, e.g. "
        '`python -c "import secrets; print(secrets.token_urlsafe(50))"`, or set DJANGO_DEBUG=1 '
        "on a development machine.",
        file=sys.stderr,
        flush=True,
    )
    # 3 is gunicorn's "worker failed to boot": the master stops instead of
    # starting the worker again and again. Celery stops on any SystemExit.
    raise SystemExit(3)

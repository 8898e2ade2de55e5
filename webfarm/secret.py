"""The web, worker and beat processes refuse to start on a placeholder or weak secret.

DJANGO_SECRET_KEY signs sessions, vote cookies and everything this farm reads
back from memcached (core.seal, queue entries). With the built-in
development key, or the example environment file's placeholder, anyone could
forge those; a short one (under MIN_LENGTH characters, or fewer than
MIN_UNIQUE different ones) can be guessed. With DEBUG off such a process
stops at once, saying why.
`make run` and `make farm` make a random key for the machine (var/secret_key)
when none is set, so they never meet this.
"""

import secrets
import sys
from pathlib import Path

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


def refuse_placeholder(process: str) -> None:
    """Stop this process (SystemExit) if it would run in production on a
    placeholder key."""
    if settings.DEBUG or not placeholder_in_use():
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


def machine_key(path: Path) -> str:
    """A random key kept in `path` (made on first use, readable by its owner only)."""
    if not path.exists():
        path.parent.mkdir(parents=True, exist_ok=True)
        path.touch(mode=0o600)
        path.write_text(secrets.token_urlsafe(50))
    return path.read_text().strip()

"""The web, worker and beat processes refuse to start on a placeholder or weak secret.

DJANGO_SECRET_KEY signs sessions, vote cookies and everything this farm reads
back from memcached (webfarm.core.seal, queue entries). With the built-in
development key, or the example environment file's placeholder, anyone could
forge those, and so with `startproject`'s development key or a near copy of
a placeholder (a character added, dropped or changed). A short one (under
MIN_LENGTH characters, or fewer than MIN_UNIQUE different ones), a phrase
(at least MAX_WORDS_SHARE of it dictionary words) or a guessable one
(repeats, sequences, keyboard rows, words: zxcvbn's estimate of the guesses
it takes under 10**MIN_GUESSES_LOG10) can be guessed. With DEBUG off such a process stops
at once, saying why.

When DJANGO_SECRET_KEY is unset, the settings read this machine's own key
(var/secret_key, made on first use), so `make run`, every manage.py command
and a celery started by hand agree. That key is this machine's alone: a
process whose memcached, database or broker is on another machine refuses
to start on it, since the farm's other machines would each have their own.
A key file others may read is made its owner's alone (0600), with a
warning; one that cannot be is refused with DEBUG off.
"""

import functools
import ipaddress
import stat
import sys
from pathlib import Path
from typing import Any
from urllib.parse import urlsplit

from django.conf import settings
from django.core import checks
from zxcvbn import zxcvbn

# The example environment file's value (deploy/webfarm.env.example).
EXAMPLE_PLACEHOLDER = "change-me-to-50-random-characters"
# What `startproject` writes: a development key, often committed with the project.
STARTPROJECT_PREFIX = "django-insecure-"
# 128 random bits written in hex are 32 characters; Django's own check wants 5 different ones.
MIN_LENGTH = 32
MIN_UNIQUE = 5
# zxcvbn counts a random character as 10 guesses, so it rates 32 random hex
# digits (128 bits) at 10**25 or more; a word, a repeat or a sequence
# padded to 32 characters stays far below (`password` x 4: 10**1.1).
MIN_GUESSES_LOG10 = 24
# A key at least this share of which zxcvbn reads as dictionary words (its
# English words, names, common passwords and the placeholders' pieces) is a
# phrase: guessed a word at a time, however long. Random keys stay far below
# (32 hex digits: at most 0.38 in 10,000, token_urlsafe(50): 0.15); the
# pangram is 0.71, a placeholder with words added 0.88.
MAX_WORDS_SHARE = 0.5
# zxcvbn takes at most 72 characters: a longer key is judged by its different
# pieces of this size (a repeated piece counts once), the first few of them.
PIECE, PIECES = 64, 4
# A placeholder's pieces of this length and longer are words zxcvbn knows,
# so a key made from one by a few edits is rated as those edits.
PLACEHOLDER_PIECE = 4


@functools.cache
def _placeholder_pieces(*placeholders: str) -> tuple[str, ...]:
    return tuple(
        sorted(
            {
                text[i:j].lower()
                for text in placeholders
                for i in range(len(text))
                for j in range(i + PLACEHOLDER_PIECE, len(text) + 1)
            }
        )
    )


def weakness(key: str) -> str | None:
    """Why the key cannot keep the farm's secrets, or None."""
    if not key:
        return "it is not set"
    if key in {settings.DEV_SECRET_KEY, EXAMPLE_PLACEHOLDER}:
        return "it is a placeholder"
    if key.startswith(STARTPROJECT_PREFIX):
        return f"it is a development key from `startproject` ({STARTPROJECT_PREFIX}…)"
    if len(key) < MIN_LENGTH:
        return f"it is shorter than {MIN_LENGTH} characters"
    if len(set(key)) < MIN_UNIQUE:
        return f"it has fewer than {MIN_UNIQUE} different characters"
    known = list(_placeholder_pieces(settings.DEV_SECRET_KEY, EXAMPLE_PLACEHOLDER))
    pieces = list(dict.fromkeys(key[i : i + PIECE] for i in range(0, len(key), PIECE)))[:PIECES]
    rated = [zxcvbn(piece, user_inputs=known) for piece in pieces]
    guesses = sum(r["guesses_log10"] for r in rated)
    if guesses < MIN_GUESSES_LOG10:
        return (
            f"it is easy to guess (repeats, sequences, words or a placeholder's pieces: about "
            f"10^{guesses:.0f} guesses, fewer than 10^{MIN_GUESSES_LOG10})"
        )
    words = sum(len(m["token"]) for r in rated for m in r["sequence"] if m["pattern"] == "dictionary")
    if words >= MAX_WORDS_SHARE * sum(len(piece) for piece in pieces):
        return (
            "it is mostly words or a placeholder's pieces (a phrase is guessed a word at a time, "
            "however long)"
        )
    return None


def open_key_file(process: str) -> str | None:
    """Why the machine's key file (when the key comes from it) is not its
    owner's alone, or None. One others may read is made so (0600), with a
    warning: only one that cannot be is an answer."""
    path = Path(settings.SECRET_KEY_FILE)
    if not getattr(settings, "SECRET_KEY_FROM_FILE", False) or not path.is_file():
        return None
    mode = stat.S_IMODE(path.stat().st_mode)
    if not mode & 0o077:
        return None
    try:
        path.chmod(0o600)
    except OSError as exc:
        return (
            f"{path} (the secret key) may be read by others (mode {mode:04o}) "
            f"and cannot be made private: {exc}"
        )
    print(
        f"webfarm {process}: warning: {path} (the secret key) could be read by others (mode {mode:04o}); "
        "it is now its owner's alone (0600). Whoever read it can forge sessions: make a new key.",
        file=sys.stderr,
        flush=True,
    )
    return None


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
    exposed = open_key_file(process)
    if settings.DEBUG:
        return
    if exposed:
        print(f"webfarm {process}: refusing to start: {exposed}", file=sys.stderr, flush=True)
        raise SystemExit(3)
    elsewhere = other_machines() if getattr(settings, "SECRET_KEY_FROM_FILE", False) else []
    weak = weakness(settings.SECRET_KEY)
    if elsewhere and weak is None:
        print(
            f"webfarm {process}: refusing to start: DJANGO_SECRET_KEY is not set, and this farm is not "
            f"on this machine alone ({', '.join(elsewhere)}): every machine would use a key of its own. "
            "Set it to the same long random value on every machine.",
            file=sys.stderr,
            flush=True,
        )
        raise SystemExit(3)
    if weak is None:
        return
    print(
        f"webfarm {process}: refusing to start: DJANGO_SECRET_KEY cannot keep the farm's secrets: "
        f"{weak}, and DJANGO_DEBUG is off. "
        "Set it to the same long random value on every machine, e.g. "
        '`python -c "import secrets; print(secrets.token_urlsafe(50))"`, or set DJANGO_DEBUG=1 '
        "on a development machine.",
        file=sys.stderr,
        flush=True,
    )
    # 3 is gunicorn's "worker failed to boot": the master stops instead of
    # starting the worker again and again. Celery stops on any SystemExit.
    raise SystemExit(3)


LOCAL_HOSTS = {"127.0.0.1", "localhost", "[::1]"}


@checks.register()
def check_dev_key_exposed(app_configs: Any = None, **kwargs: Any) -> list[checks.CheckMessage]:
    """The dev key on a site that answers beyond this machine (DEBUG on: the
    processes start, and this says so)."""
    exposed = set(settings.ALLOWED_HOSTS) - LOCAL_HOSTS
    if not exposed or settings.SECRET_KEY != settings.DEV_SECRET_KEY:
        return []
    return [
        checks.Warning(
            f"DJANGO_SECRET_KEY is not set but {sorted(exposed)} may reach this site: "
            "sessions are signed with the public dev key",
            hint="Set DJANGO_SECRET_KEY to the same random value on every node.",
            id="demofarm.W001",
        )
    ]

"""A project's own processes refuse a configuration the library's checks
call wrong, as `manage.py check` says it: gunicorn and Celery run no
checks. The core app connects Celery's worker and beat start signals to
this; a web node runs it as its WSGI file wraps the application in
PollGate (docs/install.md). They stop with the reasons, before they
serve, rather than answer 500 at the first request."""

import sys
from typing import Any

from django.core import checks

_passed: set[tuple[str, tuple[str, ...]]] = set()


def refuse_misconfigured(process: str, ids: tuple[str, ...] = ("webfarm_",)) -> None:
    """SystemExit(3) with the reasons if a check whose id starts with one of
    `ids` (the library's; `("",)`: every check) finds an error; once per
    process kind and process (a web node's every PollGate)."""
    if (process, ids) in _passed:
        return
    # No database: Django 6.1 would otherwise open a connection for the
    # model checks, in a process that may fork right after.
    errors = [
        message
        for message in checks.run_checks(databases=[])
        if message.level >= checks.ERROR
        and not message.is_silenced()
        and str(message.id or "").startswith(ids)
    ]
    if not errors:
        _passed.add((process, ids))
        return
    reasons = "\n".join(f"  {message}" for message in errors)
    print(f"webfarm {process}: refusing to start, the configuration has errors:\n{reasons}", file=sys.stderr)
    sys.stderr.flush()
    # 3: gunicorn's "worker failed to boot", which stops its master too, not a boot loop.
    raise SystemExit(3)


def on_worker_init(**kwargs: Any) -> None:
    refuse_misconfigured("worker")  # SystemExit passes through Celery's signal dispatch


def on_beat_init(**kwargs: Any) -> None:
    refuse_misconfigured("beat")

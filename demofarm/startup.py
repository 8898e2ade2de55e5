"""What the web, worker and beat processes check before they serve.

`manage.py` runs Django's system checks; gunicorn and Celery do not. So a
farm process runs them itself at start and stops with the reasons on any
error (a server list that does not parse, a namespace memcached cannot use,
a lifetime over 30 days), rather than fail at the first request.
"""

import sys

from django.core import checks

from demofarm.secret import refuse_placeholder


def refuse_to_start_misconfigured(process: str) -> None:
    """SystemExit(3) with the reasons if this process must not start."""
    refuse_placeholder(process)
    # No database: Django 6.1 would otherwise open a connection for the model
    # checks, in a process that may fork right after.
    errors = [m for m in checks.run_checks(databases=[]) if m.level >= checks.ERROR and not m.is_silenced()]
    if not errors:
        return
    reasons = "\n".join(f"  {message}" for message in errors)
    print(f"webfarm {process}: refusing to start, the configuration has errors:\n{reasons}", file=sys.stderr)
    sys.stderr.flush()
    # 3 is gunicorn's "worker failed to boot" (see demofarm.secret).
    raise SystemExit(3)

"""What the web, worker and beat processes check before they serve.

`manage.py` runs Django's system checks; gunicorn and Celery do not. So a
farm process runs them itself at start and stops with the reasons on any
error (a server list that does not parse, a namespace memcached cannot use,
a lifetime over 30 days), rather than fail at the first request.
"""

from demofarm.secret import refuse_placeholder
from webfarm.core.startup import refuse_misconfigured


def refuse_to_start_misconfigured(process: str) -> None:
    """SystemExit(3) with the reasons if this process must not start: a
    placeholder key, or an error of any check, Django's and the demo's too."""
    refuse_placeholder(process)
    refuse_misconfigured(process, ids=("",))

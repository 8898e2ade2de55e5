"""The path as the activity log writes it: with the secrets it carries left out.

A read token in a URL (/progress/<job>/<read token>/) is a bearer secret:
whoever reads the log could follow the job. The log keeps the route and the
job, and puts a placeholder where the token was.
"""

import re

from django.http import HttpRequest

# URL parameters that are secrets (progress.urls: the read token).
SECRET_KWARGS = frozenset({"token"})
HIDDEN = "<token>"
MAX_PATH = 500


def loggable_path(request: HttpRequest) -> str:
    path = request.path
    match = getattr(request, "resolver_match", None)
    if match is not None:
        for name in SECRET_KWARGS & match.kwargs.keys():
            value = str(match.kwargs[name])
            if value:
                path = path.replace(f"/{value}/", f"/{HIDDEN}/").replace(f"/{value}", f"/{HIDDEN}")
    return path[:MAX_PATH]


# The read-token URL (progress.urls), for logs that have no resolved route (gunicorn's).
_TOKEN_PATH = re.compile(r"(/progress/[A-Za-z0-9_-]{22}/)[A-Za-z0-9_-]{22}(?=[/?#\s]|$)")


def hide_tokens(path: str) -> str:
    """`path` (or a request line) with every read token replaced by HIDDEN."""
    return _TOKEN_PATH.sub(rf"\g<1>{HIDDEN}", path)

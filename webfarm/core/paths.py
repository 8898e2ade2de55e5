"""The path as the logs write it: with the secrets it carries left out.

A read token in a URL (/progress/<job>/<read token>/) is a bearer secret:
whoever reads the log could follow the job. The log keeps the route and the
job, and puts a placeholder where the token was. Which URL arguments are
secrets, the app whose URLs carry them says (`hide_in_logs`, from its
AppConfig.ready()): this module knows no app's URLs.
"""

import re

from django.http import HttpRequest

HIDDEN = "<token>"
MAX_PATH = 500

# URL arguments that are secrets, and the raw paths that carry one (the
# secret as the pattern's group "secret"), as the apps named them.
_secret_arguments: set[str] = set()
_secret_paths: list[re.Pattern[str]] = []


def hide_in_logs(*, argument: str, pattern: str) -> None:
    """URL argument `argument` is a bearer secret. `pattern` finds it in a
    path no route was resolved for (gunicorn's access log, a request line),
    as its group "secret"."""
    compiled = re.compile(pattern)
    if "secret" not in compiled.groupindex:
        raise ValueError(f"{pattern!r} has no group named 'secret'")
    _secret_arguments.add(argument)
    if compiled not in _secret_paths:
        _secret_paths.append(compiled)


def loggable_path(request: HttpRequest) -> str:
    path = request.path
    match = getattr(request, "resolver_match", None)
    if match is not None:
        for name in _secret_arguments & match.kwargs.keys():
            value = str(match.kwargs[name])
            if value:
                path = path.replace(f"/{value}/", f"/{HIDDEN}/").replace(f"/{value}", f"/{HIDDEN}")
    return path[:MAX_PATH]


def _hidden(found: re.Match[str]) -> str:
    start, end = found.span("secret")
    whole = found.group(0)
    return whole[: start - found.start()] + HIDDEN + whole[end - found.start() :]


def hide_tokens(path: str) -> str:
    """`path` (or a request line) with every secret an app named replaced by HIDDEN."""
    for pattern in _secret_paths:
        path = pattern.sub(_hidden, path)
    return path

"""The path as the logs write it: with the secrets it carries left out.

A read token in a URL (/progress/<job>/<read token>/) is a bearer secret:
whoever reads the log could follow the job. The log keeps the route and the
job, and puts a placeholder where the token was. Which URL arguments are
secrets, the app whose URLs carry them says (`hide_in_logs`, from its
AppConfig.ready()): this module knows no app's URLs.

The loggers that write request paths (SECRET_LOGGERS: Django's request log,
runserver's, gunicorn's access log) get a filter that hides them in every
record, whatever handlers and formats the project configures: a site that
installs the apps logs no token without a line of configuration.
"""

import logging
import re
from urllib.parse import unquote

from django.http import HttpRequest

HIDDEN = "<token>"
MAX_PATH = 500

# URL arguments that are secrets, and the raw paths that carry one (the
# secret as the pattern's group "secret"), as the apps named them.
_secret_arguments: set[str] = set()
_secret_paths: list[re.Pattern[str]] = []


# Loggers whose records carry request paths: a 4xx or 5xx (django.request,
# django.security.csrf), a request line (django.server, gunicorn.access).
SECRET_LOGGERS = ("django.request", "django.security.csrf", "django.server", "gunicorn.access")


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
    for name in SECRET_LOGGERS:
        logging.getLogger(name).addFilter(HIDE_SECRETS)  # once: a logger keeps one of each


def loggable_path(request: HttpRequest) -> str:
    """The request's path with its secrets hidden: the route's secret
    arguments where a route was resolved, and whatever the apps' patterns
    find in any path (one no route answered: no slash at its end, `//`)."""
    path = request.path
    match = getattr(request, "resolver_match", None)
    if match is not None:
        for name in _secret_arguments & match.kwargs.keys():
            value = str(match.kwargs[name])
            if value:
                path = path.replace(f"/{value}/", f"/{HIDDEN}/").replace(f"/{value}", f"/{HIDDEN}")
    return hide_tokens(path)[:MAX_PATH]


def _hidden_secret(found: re.Match[str]) -> str:
    start, end = found.span("secret")
    whole = found.group(0)
    return whole[: start - found.start()] + HIDDEN + whole[end - found.start() :]


def hide_tokens(path: str) -> str:
    """`path` (or a request line) with every secret an app named replaced by
    HIDDEN. A line with percent-escapes is read decoded, as the server and
    Django decode the path (`%2F` is a slash to them): where that hides a
    secret, the decoded line is what is written."""
    decoded = unquote(path) if "%" in path else path
    hidden = decoded
    for pattern in _secret_paths:
        hidden = pattern.sub(_hidden_secret, hidden)
    return hidden if hidden != decoded else path


class HideSecrets(logging.Filter):
    """Hides the secrets in a record's message and arguments. A record that
    names a request whose path carries one loses the request (its path and
    environ carry it too, and a handler such as AdminEmailHandler would
    write them out): the message says the status and the hidden path."""

    def filter(self, record: logging.LogRecord) -> bool:
        if isinstance(record.msg, str):
            record.msg = hide_tokens(record.msg)
        if isinstance(record.args, dict):
            # In place: gunicorn's atoms are a dict of its own kind (missing ones read as "-").
            for key, value in record.args.items():
                if isinstance(value, str):
                    record.args[key] = hide_tokens(value)
        elif isinstance(record.args, tuple):
            record.args = tuple(_hidden(value) for value in record.args)
        request = getattr(record, "request", None)
        path = getattr(request, "path", None)
        if isinstance(path, str) and hide_tokens(path) != path:
            record.request = None
        return True


def _hidden(value: object) -> object:
    return hide_tokens(value) if isinstance(value, str) else value


HIDE_SECRETS = HideSecrets()

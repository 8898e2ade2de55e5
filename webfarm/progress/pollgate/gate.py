"""The WSGI entry: which requests are polls, and which way each is answered."""

import logging
import threading
from collections.abc import Callable, Iterable
from functools import lru_cache
from typing import Any

from django.conf import settings
from django.core import signals
from django.core.handlers.wsgi import WSGIRequest, get_script_name
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import Resolver404, ResolverMatch, resolve, set_script_prefix
from django.utils.log import log_response

from webfarm.core.startup import refuse_misconfigured
from webfarm.progress import views
from webfarm.progress.conf import get_config
from webfarm.progress.pollgate.chain import Handler, checked_host, poll_chain
from webfarm.progress.pollgate.lanes import Lanes, lanes

logger = logging.getLogger(__name__)

POLL_VIEWS = (views.progress_detail, views.progress_by_token)
# No poll URL is longer (a job id and a token are 22 characters each).
MAX_POLL_PATH = 200

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]


# A request body Django did not read (a POST refused for CSRF, a token
# missing, a 405) is read to its end before the answer goes, up to this many
# bytes (more than nginx's client_max_body_size in deploy/nginx). gunicorn
# reads at most 64 KB of it after answering and otherwise closes the
# connection it has just answered with keep-alive: nginx, which keeps
# connections to the nodes open, may send another person's POST on it in
# the meantime, and answers that POST 502 (it never resends a POST).
DRAIN_AT_MOST = 8 * 1024 * 1024


def answered_and_drained(
    app: WSGIApp, environ: dict[str, Any], start_response: Callable[..., Any]
) -> Iterable[bytes]:
    answer = app(environ, start_response)
    stream = environ.get("wsgi.input")
    if stream is None or not (environ.get("CONTENT_LENGTH") or environ.get("HTTP_TRANSFER_ENCODING")):
        return answer
    left = DRAIN_AT_MOST
    try:
        while left > 0:
            chunk = stream.read(min(64 * 1024, left))
            if not chunk:
                break
            left -= len(chunk)
    except (OSError, ValueError) as exc:  # the client went away: the server closes anyway
        logger.debug("request body not drained: %s", exc)
    return answer


class PollGate:
    def __init__(self, app: WSGIApp) -> None:
        # The web node's start: it refuses a configuration the checks call wrong.
        refuse_misconfigured("web")
        self.app = app
        self._chain: Handler | None = None
        self._lanes: Lanes | None = None
        self._built = False
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        # Ids and tokens are ASCII: a path that is not is no poll of ours (and
        # the server's raw path, bytes as latin-1, is not the one Django resolves).
        if environ.get("REQUEST_METHOD") != "GET":
            return answered_and_drained(self.app, environ, start_response)
        if len(path) > MAX_POLL_PATH or not path.isascii():
            return self.app(environ, start_response)
        poll = _poll_view(path)
        chain = self._chain if self._built else self._build()
        if poll is None or chain is None:
            return self.app(environ, start_response)
        if self._lanes is not None:
            answered = self._lanes.answer(environ, start_response, path, poll)
            if answered is not None:
                return answered
        try:
            # On a copy: a WSGIRequest writes the decoded path into its environ,
            # and Django must get the server's own if the gate hands it over.
            request = WSGIRequest(dict(environ))
        except Exception:
            return self.app(environ, start_response)
        # As Django's handler sets it (the logs read it to hide the read token).
        request.resolver_match = poll
        return self._answer(environ, start_response, chain, request)

    def _answer(
        self,
        environ: dict[str, Any],
        start_response: Callable[..., Any],
        chain: Handler,
        request: WSGIRequest,
    ) -> Iterable[bytes]:
        set_script_prefix(get_script_name(environ))
        signals.request_started.send(sender=type(self), environ=environ)
        try:
            checked_host(request)
            response = chain(request)
        except Exception:
            # Django answers it as it answers any request (its 400 or 500, its log).
            logger.debug("poll handed to Django after an exception", exc_info=True)
            signals.request_finished.send(sender=type(self))
            return self.app(environ, start_response)
        if response.streaming:
            response.close()
            return self.app(environ, start_response)
        if not response.has_header("Content-Length"):
            # As CommonMiddleware does: the server need not chunk it.
            response["Content-Length"] = str(len(response.content))
        if response.status_code >= 400:
            log_response("%s: %s", response.reason_phrase, request.path, response=response, request=request)
        # As WSGIHandler (its attributes, which the stubs leave out): closing
        # the response closes the request and sends request_finished.
        response._resource_closers.append(request.close)  # type: ignore[attr-defined]
        response._handler_class = type(self)  # type: ignore[attr-defined]
        headers = [
            *response.items(),
            *(("Set-Cookie", cookie.OutputString()) for cookie in response.cookies.values()),
        ]
        start_response(f"{response.status_code} {response.reason_phrase}", headers)
        return response

    def _build(self) -> Handler | None:
        with self._lock:
            if not self._built:
                if get_config()["POLL_GATE"]:
                    self._chain = poll_chain(settings.MIDDLEWARE)
                    self._lanes = lanes(settings.MIDDLEWARE) if self._chain is not None else None
                self._built = True
        return self._chain


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    if setting == "ROOT_URLCONF":
        _poll_view.cache_clear()


# Paths repeat (a bar polls its own hundreds of times): bounded in entries,
# and in their length (MAX_POLL_PATH).
@lru_cache(maxsize=4096)
def _poll_view(path: str) -> ResolverMatch | None:
    try:
        match = resolve(path)
    except (Resolver404, ValueError):
        return None
    if match.func not in POLL_VIEWS or match.args:
        return None
    return match

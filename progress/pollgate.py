"""Progress polls answered before Django's middleware chain.

    # wsgi.py
    application = PollGate(get_wsgi_application())

A bar polls every second or two, and most of what a poll costs through
Django is the machinery around the view: the whole middleware chain, the
URL resolver, the handler's wrappers. The gate answers the two poll URLs
itself (progress.views.progress_detail and progress_by_token, wherever the
URLconf mounts them: it asks the resolver, once per path) and hands every
other request to Django untouched.

What a poll gets is what Django gives it, from Django's own code: the views
run as they are, inside the project's own middleware (SecurityMiddleware's
headers, the session and its user, X-Frame-Options, the request log), in
the project's order, with request_started and request_finished sent. Only
the middleware that does nothing for a GET of a poll is left out
(SKIPPED_FOR_POLLS: no form, no message, no static file, no task started).
A project whose MIDDLEWARE holds something the gate cannot run that way (a
process_view or process_exception hook, async only) gets no gate: every
request goes to Django, and the log says why, once.

A view that raises, or an answer the gate cannot give (a HEAD, a streamed
body), is handed to Django, which answers it as it always has.

The token URL has a shorter lane still, for its common case: its document
is published. Nothing of a session or a user is involved, so the lane sends
the document (or a 304) with json_polled's headers and the headers the
project's SecurityMiddleware and XFrameOptionsMiddleware add, worked out
once by running them; the other middleware hears of the poll through its
`poll_answered(path, status)`. Where a middleware in the chain has no such
hook, the lane is closed and the chain above answers.
"""

import io
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
from django.http import HttpRequest, HttpResponse
from django.urls import Resolver404, ResolverMatch, resolve, set_script_prefix
from django.utils.log import log_response
from django.utils.module_loading import import_string

from progress import selectors, views
from progress.conf import get_config
from webfarm.core.counters import count_soon
from webfarm.core.http import json_polled

logger = logging.getLogger(__name__)

# Middleware that does nothing for a poll (a GET of JSON, no form, no static
# file, no message shown, no task started, the URL already matched), so the
# gate leaves it out. CommonMiddleware is run after all where its settings
# make it refuse or redirect requests (DISALLOWED_USER_AGENTS, PREPEND_WWW).
SKIPPED_FOR_POLLS = frozenset(
    {
        "django.middleware.common.CommonMiddleware",
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "whitenoise.middleware.WhiteNoiseMiddleware",
        "webfarm.djangotasks.owners.TaskOwnerMiddleware",
    }
)
# What Django's handler calls besides the chain itself; the gate does not.
UNRUN_HOOKS = ("process_view", "process_exception", "process_template_response")
POLL_VIEWS = (views.progress_detail, views.progress_by_token)
# No poll URL is longer (a job id and a token are 22 characters each).
MAX_POLL_PATH = 200

WSGIApp = Callable[[dict[str, Any], Callable[..., Any]], Iterable[bytes]]
Handler = Callable[[HttpRequest], HttpResponse]


class PollGate:
    def __init__(self, app: WSGIApp) -> None:
        self.app = app
        self._chain: Handler | None = None
        self._lane: TokenLane | None = None
        self._built = False
        self._lock = threading.Lock()

    def __call__(self, environ: dict[str, Any], start_response: Callable[..., Any]) -> Iterable[bytes]:
        path = environ.get("PATH_INFO", "")
        # Ids and tokens are ASCII: a path that is not is no poll of ours (and
        # the server's raw path, bytes as latin-1, is not the one Django resolves).
        if environ.get("REQUEST_METHOD") != "GET" or len(path) > MAX_POLL_PATH or not path.isascii():
            return self.app(environ, start_response)
        poll = _poll_view(path)
        chain = self._chain if self._built else self._build()
        if poll is None or chain is None:
            return self.app(environ, start_response)
        try:
            # On a copy: a WSGIRequest writes the decoded path into its environ,
            # and Django must get the server's own if the gate hands it over.
            request = WSGIRequest(dict(environ))
        except Exception:
            return self.app(environ, start_response)
        # As Django's handler sets it (the logs read it to hide the read token).
        request.resolver_match = poll
        if self._lane is not None and poll.func is views.progress_by_token:
            answered = self._lane.answer(request, start_response, path, poll.kwargs)
            if answered is not None:
                return answered
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
            _checked_host(request)
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
        response._resource_closers.append(request.close)
        # As WSGIHandler: closing the response sends request_finished.
        response._handler_class = type(self)
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
                    self._lane = token_lane(settings.MIDDLEWARE) if self._chain is not None else None
                self._built = True
        return self._chain


# What the lane knows these do to a poll's answer: headers (worked out once),
# or nothing at all for a URL that reads no session.
HEADERS_ONLY = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
)
LAZY_ONLY = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
)


# A poll with these goes the longer way: nginx's fall-back republishes, and
# preconditions other than If-None-Match are Django's to answer (412).
ASKED_ELSEWHERE = (
    "HTTP_X_PROGRESS_MISSED",
    "HTTP_IF_MATCH",
    "HTTP_IF_UNMODIFIED_SINCE",
    "HTTP_IF_MODIFIED_SINCE",
)


class TokenLane:
    def __init__(self, headers: dict[bool, list[tuple[str, str]]], listeners: list[Any]) -> None:
        self.headers = headers
        self.listeners = listeners
        # SecurityMiddleware redirects these before any view: the chain does.
        self.https_only = bool(settings.SECURE_SSL_REDIRECT)

    def answer(
        self, request: WSGIRequest, start_response: Callable[..., Any], path: str, kwargs: dict[str, Any]
    ) -> Iterable[bytes] | None:
        """The answer when the job's document is published, else None."""
        if any(request.META.get(name) for name in ASKED_ELSEWHERE):
            return None
        try:
            _checked_host(request)
            secure = request.is_secure()
            if self.https_only and not secure:
                return None
            document = selectors.published_document(job_id=kwargs["job_id"], token=kwargs["token"])
        except Exception:  # a host not allowed, memcached away, or worse: the chain answers as Django would
            return None
        if not isinstance(document, bytes):
            return None
        response = json_polled(request, document)
        for name, value in self.headers[secure]:
            if not response.has_header(name):
                response[name] = value
        response["Content-Length"] = str(len(response.content))
        count_soon("progress_polls")
        for listener in self.listeners:
            listener.poll_answered(path, response.status_code)
        start_response(f"{response.status_code} {response.reason_phrase}", list(response.items()))
        return [response.content]


def token_lane(middleware: Iterable[str]) -> TokenLane | None:
    """The lane for published token documents, or None if some middleware
    in the chain could change such an answer in a way the lane does not know."""
    listeners, header_middleware = [], []
    for path in middleware:
        if path in SKIPPED_FOR_POLLS or path in LAZY_ONLY:
            continue
        factory = import_string(path)
        if path in HEADERS_ONLY:
            header_middleware.append(factory(_no_view))
        elif hasattr(factory, "poll_answered"):
            listeners.append(factory(_no_view))
        else:
            return None
    headers = {}
    for scheme in ("http", "https"):
        sample = HttpResponse(b"{}", content_type="application/json")
        asked = WSGIRequest({"REQUEST_METHOD": "GET", "wsgi.input": io.BytesIO(), "wsgi.url_scheme": scheme})
        for instance in reversed(header_middleware):
            sample = instance.process_response(asked, sample)
        headers[asked.is_secure()] = [(k, v) for k, v in sample.items() if k != "Content-Type"]
    return TokenLane(headers, listeners)


def _checked_host(request: HttpRequest) -> None:
    """DisallowedHost for a Host not in ALLOWED_HOSTS, as Django's
    CommonMiddleware raises it (Django then answers 400)."""
    request.get_host()


def _no_view(request: HttpRequest) -> HttpResponse:
    raise AssertionError("the lane calls no view")


def poll_chain(middleware: Iterable[str]) -> Handler | None:
    """The project's middleware around the poll view, less SKIPPED_FOR_POLLS;
    None if some middleware cannot run this way (then Django answers all)."""
    skipped = set(SKIPPED_FOR_POLLS)
    if settings.DISALLOWED_USER_AGENTS or settings.PREPEND_WWW:
        skipped.discard("django.middleware.common.CommonMiddleware")
    handler: Handler = _call_view
    for path in reversed(list(middleware)):
        if path in skipped:
            continue
        factory = import_string(path)
        if not getattr(factory, "sync_capable", True):
            logger.warning("poll gate off: %s cannot run synchronously; Django answers every poll", path)
            return None
        instance = factory(handler)
        hooks = [h for h in UNRUN_HOOKS if hasattr(instance, h)]
        if hooks:
            logger.warning(
                "poll gate off: %s has %s, which the gate does not run; Django answers every poll",
                path,
                ", ".join(hooks),
            )
            return None
        handler = instance
    return handler


def _call_view(request: HttpRequest) -> HttpResponse:
    match = request.resolver_match
    return match.func(request, **match.kwargs)


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

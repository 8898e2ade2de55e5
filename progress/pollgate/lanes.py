"""Poll answers memcached alone gives, with Django's rules for them checked
here (the why is in progress.pollgate's docstring)."""

import io
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.core.handlers.wsgi import WSGIRequest
from django.db import close_old_connections
from django.http import HttpRequest, HttpResponse
from django.urls import ResolverMatch
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from progress import selectors, store, views
from progress.ids import is_valid_job_id
from progress.pollgate.chain import SKIPPED_FOR_POLLS, checked_host
from webfarm.core import users
from webfarm.core.client import get_client
from webfarm.core.counters import count_soon
from webfarm.core.http import polled_body, unchanged

# What the lanes know these do to a poll's answer: headers (worked out once).
HEADERS_ONLY = (
    "django.middleware.security.SecurityMiddleware",
    "django.middleware.clickjacking.XFrameOptionsMiddleware",
)
# The session and its user: what the session lane does itself, as they do it.
SESSION_AND_USER = (
    "django.contrib.sessions.middleware.SessionMiddleware",
    "django.contrib.auth.middleware.AuthenticationMiddleware",
)
# The session engine whose cached copy the session lane knows how to read.
SESSION_ENGINE = "webfarm.core.sessions"
# A poll with these goes the longer way: nginx's fall-back republishes, and
# preconditions other than If-None-Match are Django's to answer (412).
ASKED_ELSEWHERE = (
    "HTTP_X_PROGRESS_MISSED",
    "HTTP_IF_MATCH",
    "HTTP_IF_UNMODIFIED_SINCE",
    "HTTP_IF_MODIFIED_SINCE",
)

# Headers a poll's answer has of its own (json_polled's): the middleware's
# samples do not add them.
OWN_HEADERS = frozenset({"content-type", "etag", "cache-control", "vary", "content-length"})

# Sessions whose user the session lane remembers (a few MB at most); past
# this, it forgets them all and learns again.
MAX_SESSIONS_KNOWN = 10_000

# What a lane found: the document, and the signed-in user's name (None on
# the token URL, which asks no session).
Found = tuple[bytes | dict[str, Any], str | None]


class Lanes:
    def __init__(
        self, headers: dict[bool, list[tuple[str, str]]], listeners: list[Any], sessions: bool
    ) -> None:
        self.headers = headers
        self.listeners = listeners
        # SecurityMiddleware redirects these before any view: the chain does.
        self.https_only = bool(settings.SECURE_SSL_REDIRECT)
        self.session_store = import_string(f"{SESSION_ENGINE}.SessionStore") if sessions else None
        self.session_cookie = settings.SESSION_COOKIE_NAME
        # A session's cached copy's key: its user's id (a guess, see _by_session).
        self.user_of: dict[str, object] = {}

    def answer(
        self, request: WSGIRequest, start_response: Callable[..., Any], path: str, poll: ResolverMatch
    ) -> Iterable[bytes] | None:
        """The answer when memcached alone gives it, else None (the chain answers)."""
        if any(request.META.get(name) for name in ASKED_ELSEWHERE):
            return None
        try:
            checked_host(request)
            secure = request.is_secure()
            if self.https_only and not secure:
                return None
            if poll.func is views.progress_by_token:
                found = self._by_token(**poll.kwargs)
            elif self.session_store is not None:
                found = self._by_session(request, **poll.kwargs)
            else:
                return None
        except Exception:  # a host not allowed, memcached away, or worse: the chain answers as Django would
            return None
        finally:
            # As request_finished does (a lane may have asked the database:
            # revocations, a row while memcached is away).
            close_old_connections()
        if found is None:
            return None
        document, username = found
        body, etag = polled_body(document)
        # What json_polled and the middleware make of it, without a response
        # object: the 304 has no type, nobody's session is saved or cycled.
        if unchanged(request.META.get("HTTP_IF_NONE_MATCH"), etag):
            status, headers, body = "304 Not Modified", [("ETag", etag), ("Cache-Control", "no-store")], b""
        else:
            status = "200 OK"
            headers = [("Content-Type", "application/json"), ("ETag", etag), ("Cache-Control", "no-store")]
        if username is not None:
            # As SessionMiddleware does for a request that read the session.
            headers.append(("Vary", "Cookie"))
        headers += self.headers[secure]
        headers.append(("Content-Length", str(len(body))))
        count_soon("progress_polls")
        code = int(status[:3])
        for listener in self.listeners:
            listener.poll_answered(path, code, username)
        start_response(status, headers)
        return [body]

    def _by_token(self, *, job_id: str, token: str) -> Found | None:
        document = selectors.published_document(job_id=job_id, token=token)
        return (document, None) if isinstance(document, bytes) else None

    def _by_session(self, request: HttpRequest, *, job_id: str) -> Found | None:
        """What progress_detail answers, when the session, the user and the
        record are in memcached and Django's rules need nothing else.

        One round trip for the three: whose session it is (its user id) is
        remembered from the last time, and only as a guess of which user's
        key to read with it; the session's value read beside it decides. A
        guess that was wrong, or none, costs a second round trip."""
        session_key = request.COOKIES.get(self.session_cookie)
        if not session_key or not is_valid_job_id(job_id):
            return None
        session = self.session_store(session_key)
        if session.session_key is None:  # not one Django could have made
            return None
        copy_key, record_key = session.cache_key, store.record_key(job_id)
        guess = self.user_of.get(copy_key)
        guessed_key = None if guess is None else users.cache_key(guess)
        found = get_client().get_many([copy_key, record_key, *([guessed_key] if guessed_key else [])])
        data = session.cached_data(found.get(copy_key))
        if data is None or data.get(BACKEND_SESSION_KEY) != users.BACKEND or SESSION_KEY not in data:
            return None
        user_id = data[SESSION_KEY]
        if user_id == guess:
            user = users.snapshot_fields(user_id, found.get(guessed_key))
        else:
            user = users.cached_fields(user_id)
            if len(self.user_of) >= MAX_SESSIONS_KNOWN:
                self.user_of.clear()
            self.user_of[copy_key] = user_id
        # As django.contrib.auth.get_user: an active user whose password hash
        # the session's hash still matches. A mismatch (a password changed, a
        # rotated key) is the chain's: Django flushes the session or cycles it.
        session_hash = data.get(HASH_SESSION_KEY)
        if (
            user is None
            or not user["is_active"]
            or not isinstance(session_hash, str)
            or not constant_time_compare(session_hash, user["auth"])
        ):
            return None
        owner_id = None if user["is_staff"] else user["pk"]
        record = selectors.cached_job_record(job_id=job_id, owner_id=owner_id, raw=found.get(record_key))
        return None if record is None else (record.public(), user["username"])


def lanes(middleware: Iterable[str]) -> Lanes | None:
    """The lanes, or None if some middleware in the chain could change a
    poll's answer in a way the lanes do not know. The session lane is open
    where sessions and users are the cached ones it reads."""
    listeners, header_middleware, session_and_user = [], [], []
    for path in middleware:
        if path in SKIPPED_FOR_POLLS:
            continue
        if path in SESSION_AND_USER:
            session_and_user.append(path)
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
        # Ones a poll's answer has already (json_polled's) are its own.
        headers[asked.is_secure()] = [
            (k, v)
            for k, v in sample.items()
            if k.lower() not in ("content-type", "etag", "cache-control", "vary")
        ]
    sessions = (
        session_and_user == list(SESSION_AND_USER)
        and settings.SESSION_ENGINE == SESSION_ENGINE
        and not settings.SESSION_SAVE_EVERY_REQUEST
        and users.BACKEND in settings.AUTHENTICATION_BACKENDS
    )
    return Lanes(headers, listeners, sessions)


def _no_view(request: HttpRequest) -> HttpResponse:
    raise AssertionError("the lanes call no view")

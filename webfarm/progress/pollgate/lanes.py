"""Poll answers memcached alone gives, with Django's rules for them checked
here (the why is in webfarm.progress.pollgate's docstring)."""

import io
import threading
import time
import weakref
from collections.abc import Callable, Iterable
from typing import Any

from django.conf import settings
from django.contrib.auth import BACKEND_SESSION_KEY, HASH_SESSION_KEY, SESSION_KEY
from django.core.handlers.wsgi import WSGIRequest, get_str_from_wsgi
from django.core.signals import setting_changed
from django.db import close_old_connections
from django.dispatch import receiver
from django.http import HttpRequest, HttpResponse
from django.http.cookie import parse_cookie
from django.urls import ResolverMatch
from django.utils.crypto import constant_time_compare
from django.utils.module_loading import import_string

from webfarm.core import sessions, users
from webfarm.core.client import get_values
from webfarm.core.counters import count_soon
from webfarm.core.http import polled_body, unchanged
from webfarm.core.revocations import UNCHECKED, CheckedCopies
from webfarm.progress import selectors, store, views
from webfarm.progress.ids import is_valid_job_id
from webfarm.progress.pollgate.chain import COMMON, SKIPPED_FOR_POLLS, checked_host, poll_skippable

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
SESSION_ENGINE = sessions.ENGINE
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

# What Django's get_host() and is_secure() read of a request, whichever of
# them the settings make them read (SECURE_PROXY_SSL_HEADER's is added): a
# poll that brings the same values has the same host and scheme.
HOST_AND_SCHEME = (
    "wsgi.url_scheme",
    "HTTP_HOST",
    "SERVER_NAME",
    "SERVER_PORT",
    "HTTP_X_FORWARDED_HOST",
    "HTTP_X_FORWARDED_PORT",
)
HOST_SETTINGS = frozenset(
    {"ALLOWED_HOSTS", "DEBUG", "USE_X_FORWARDED_HOST", "USE_X_FORWARDED_PORT", "SECURE_PROXY_SSL_HEADER"}
)
# Hosts and schemes remembered (a farm has a few; past this, forgotten).
MAX_HOSTS_KNOWN = 1000

# Sessions whose user the session lane remembers, and jobs whose owner and
# read token (a few MB at most); past this, it forgets them all and learns again.
MAX_SESSIONS_KNOWN = 10_000
MAX_JOBS_KNOWN = 10_000

# What a lane found: the document, and the signed-in user's name (None on
# the token URL, which asks no session).
Found = tuple[bytes | dict[str, Any], str | None]


class Lanes:
    def __init__(
        self,
        headers: dict[bool, list[tuple[str, str]]],
        listeners: list[Any],
        sessions: bool,
        common: bool = False,
    ) -> None:
        self.headers = headers
        self.listeners = listeners
        # Whether CommonMiddleware runs: its refusals are then the lanes' too.
        self.common = common
        # SecurityMiddleware redirects these before any view: the chain does.
        self.https_only = bool(settings.SECURE_SSL_REDIRECT)
        self.session_store = import_string(f"{SESSION_ENGINE}.SessionStore") if sessions else None
        self.session_cookie = settings.SESSION_COOKIE_NAME
        # A session's key: its cached copy's key and its user's id (a guess, see _by_session).
        self.sessions: dict[str, tuple[str, object]] = {}
        # A job's owner and read token, which never change.
        self.jobs: dict[str, tuple[int, str]] = {}
        # The sessions' and users' copies checked already.
        self.copies = CheckedCopies(2 * MAX_SESSIONS_KNOWN)
        # What get_host() and is_secure() read, and their verdict on it (_secure).
        self.host_inputs = _host_inputs()
        self.hosts: dict[tuple[object, ...], bool] = {}
        self._local = threading.local()
        _all_lanes.add(self)

    def answer(
        self, environ: dict[str, Any], start_response: Callable[..., Any], path: str, poll: ResolverMatch
    ) -> Iterable[bytes] | None:
        """The answer when memcached alone gives it, else None (the chain answers)."""
        if any(environ.get(name) for name in ASKED_ELSEWHERE) or self._common_acts(environ):
            return None
        try:
            secure = self._secure(environ)
            if self.https_only and not secure:
                return None
            if poll.func is views.progress_by_token:
                found = self._by_token(**poll.kwargs)
            elif self.session_store is not None:
                found = self._by_session(environ, **poll.kwargs)
            else:
                return None
        except Exception:  # a host not allowed, memcached away, or worse: the chain answers as Django would
            return None
        finally:
            self._close_old_connections()
        if found is None:
            return None
        document, username = found
        body, etag = polled_body(document)
        # What json_polled and the middleware make of it, without a response
        # object: the 304 has no type, nobody's session is saved or cycled.
        if unchanged(environ.get("HTTP_IF_NONE_MATCH"), etag):
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

    def _common_acts(self, environ: dict[str, Any]) -> bool:
        """Whether CommonMiddleware would refuse this poll (a disallowed user
        agent: 403) or may redirect it (PREPEND_WWW): the chain answers it."""
        if not self.common:
            return False
        if settings.PREPEND_WWW:
            return True
        agent = environ.get("HTTP_USER_AGENT")
        return agent is not None and any(regex.search(agent) for regex in settings.DISALLOWED_USER_AGENTS)

    def _secure(self, environ: dict[str, Any]) -> bool:
        """Whether the poll came over HTTPS, as request.is_secure() says it;
        DisallowedHost for a Host ALLOWED_HOSTS refuses, as get_host() raises
        it. Django works it out once for each host and scheme it is asked
        with (a farm has a few); an allowed one is remembered."""
        asked = tuple(environ.get(name) for name in self.host_inputs)
        secure = self.hosts.get(asked)
        if secure is None:
            request = WSGIRequest(dict(environ))
            checked_host(request)
            secure = request.is_secure()
            if len(self.hosts) >= MAX_HOSTS_KNOWN:
                self.hosts.clear()
            self.hosts[asked] = secure
        return secure

    def forget_hosts(self) -> None:
        """The settings that judge hosts and schemes changed (tests)."""
        self.host_inputs = _host_inputs()
        self.hosts = {}

    def _close_old_connections(self) -> None:
        # As request_finished does (a lane may have asked the database: the
        # revocations, a row while memcached is away), but at most once a
        # second in a thread: it closes connections older than CONN_MAX_AGE
        # seconds or broken, and asking costs a poll a twentieth of its CPU.
        # A broken one used before then fails the lane, and the chain's
        # request_started closes it.
        now = time.monotonic()
        if now >= getattr(self._local, "close_at", 0.0):
            self._local.close_at = now + 1.0
            close_old_connections()

    def _by_token(self, *, job_id: str, token: str) -> Found | None:
        document = selectors.published_document(job_id=job_id, token=token)
        return (document, None) if isinstance(document, bytes) else None

    def _by_session(self, environ: dict[str, Any], *, job_id: str) -> Found | None:
        """What progress_detail answers, when the session, the user and the
        job are in memcached and Django's rules need nothing else.

        One round trip: whose session it is (its user id) is remembered from
        the last time, only as a guess of which user's key to read with it;
        the session's value read beside it decides. A guess that was wrong,
        or none, costs a second round trip. A job's owner and read token
        never change: once known, the job's published document (the token
        URL's answer, sealed for its key) is read beside its record, and
        sent as it is."""
        session_key = parse_cookie(get_str_from_wsgi(environ, "HTTP_COOKIE", "")).get(self.session_cookie)
        if not session_key or not is_valid_job_id(job_id):
            return None
        known = self.sessions.get(session_key)
        if known is None:
            if self.session_store is None:  # the chain has no sessions: no lane
                return None
            session = self.session_store(session_key)
            if session.session_key is None:  # not one Django could have made
                return None
            copy_key, guess = session.cache_key, None
        else:
            copy_key, guess = known
        job = self.jobs.get(job_id)
        record_key = store.record_key(job_id)
        guessed_key = None if guess is None else users.cache_key(guess)
        public_key = None if job is None else store.public_key(job_id, job[1])
        found = get_values([k for k in (copy_key, guessed_key, public_key, record_key) if k is not None])
        data = self._checked(copy_key, found.get(copy_key), sessions.cached_copy)
        if (
            data is None
            or not users.is_cached_backend(data.get(BACKEND_SESSION_KEY))
            or SESSION_KEY not in data
        ):
            return None
        user_id = data[SESSION_KEY]
        if guessed_key is not None and user_id == guess:
            raw_user = found.get(guessed_key)
            user = self._checked(guessed_key, raw_user, lambda _, raw: users.snapshot_fields(user_id, raw))
        else:
            user = users.cached_fields(user_id)
            _remember(self.sessions, session_key, (copy_key, user_id), MAX_SESSIONS_KNOWN)
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
        owner_id = selectors.owner_scope(
            pk=user["pk"], is_active=user["is_active"], is_staff=user["is_staff"]
        )
        if job is not None and public_key is not None and (owner_id is None or job[0] == owner_id):
            # A running job's document lives no longer than it may stay
            # silent (store.publish), as the record's own staleness rule.
            body = store.public_body(job_id, job[1], found.get(public_key))
            if body is not None:
                return body, user["username"]
        record = selectors.cached_job_record(job_id=job_id, owner_id=owner_id, raw=found.get(record_key))
        if record is None:
            return None
        if record.read_token:
            _remember(self.jobs, job_id, (record.owner, record.read_token), MAX_JOBS_KNOWN)
        return record.public(), user["username"]

    def _checked(self, key: str, raw: bytes | None, read: Callable[[str, bytes | None], Any]) -> Any:
        """read(key, raw), a sealed copy's reader, unless these bytes were
        read before (their lifetime and revocations are looked at again)."""
        parsed = self.copies.known(key, raw)
        if parsed is UNCHECKED:
            parsed = read(key, raw)
            self.copies.remember(key, raw, parsed)
        return parsed


def _remember(memory: dict[str, Any], key: str, value: object, most: int) -> None:
    if len(memory) >= most:  # forgotten all at once, and learnt again
        memory.clear()
    memory[key] = value


def lanes(middleware: Iterable[str]) -> Lanes | None:
    """The lanes, or None if some middleware in the chain could change a
    poll's answer in a way the lanes do not know. The session lane is open
    where sessions and users are the cached ones it reads."""
    listeners, header_middleware, session_and_user = [], [], []
    middleware = list(middleware)
    for path in middleware:
        if path in SKIPPED_FOR_POLLS:
            continue
        if path in SESSION_AND_USER:
            session_and_user.append(path)
            continue
        factory = import_string(path)
        if poll_skippable(factory):
            continue
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
        and any(users.is_cached_backend(path) for path in settings.AUTHENTICATION_BACKENDS)
    )
    return Lanes(headers, listeners, sessions, common=COMMON in middleware)


def _host_inputs() -> tuple[str, ...]:
    inputs: tuple[str, ...] = HOST_AND_SCHEME
    if settings.SECURE_PROXY_SSL_HEADER:
        inputs += (settings.SECURE_PROXY_SSL_HEADER[0],)
    return inputs


_all_lanes: "weakref.WeakSet[Lanes]" = weakref.WeakSet()


@receiver(setting_changed)
def _settings_changed(*, setting: str, **kwargs: object) -> None:
    if setting in HOST_SETTINGS:
        for each in list(_all_lanes):
            each.forget_hosts()


def _no_view(request: HttpRequest) -> HttpResponse:
    raise AssertionError("the lanes call no view")

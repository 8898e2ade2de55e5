"""Login tries: after a few wrong passwords, a pause, farm-wide.

Every wrong password costs the farm a password hash (PBKDF2, a fifth of a
second of a core) and gives a guesser one more try. A username or an address
that failed LOGIN_FAILURES times within LOGIN_WINDOW seconds is refused at
once (429, with Retry-After) until the window lapses, before any password is
hashed. The counts live in memcached (`login-fail:user:<hash>`,
`login-fail:addr:<hash>`, for LOGIN_WINDOW seconds): someone who can write
there can refuse a user's logins for a window at a time, as with any slot,
never let a guesser through. memcached unreachable: logins go on unthrottled.
"""

import hashlib
import logging

from django.contrib.auth.views import LoginView
from django.http import HttpRequest, HttpResponse
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.core.http import client_address
from webfarm.core.refusals import note_refusal
from webfarm.limits.conf import get_config

logger = logging.getLogger(__name__)


def failure_keys(request: HttpRequest, username: str) -> list[str]:
    """The keys counting this username's and this address's failures (hashed:
    any string may be typed as a username)."""

    def digest(value: str) -> str:
        return hashlib.blake2b(value.encode(errors="replace"), digest_size=12).hexdigest()

    keys = [f"login-fail:user:{digest(username.strip().lower())}"]
    address = client_address(request)
    if address:
        keys.append(f"login-fail:addr:{digest(address)}")
    return keys


def _limits() -> list[int]:
    config = get_config()
    return [config["LOGIN_FAILURES"], config["LOGIN_FAILURES_PER_ADDRESS"]]


def is_throttled(request: HttpRequest, username: str) -> bool:
    keys = failure_keys(request, username)
    try:
        found = get_client().get_many(keys)
    except (MemcacheError, OSError) as exc:
        logger.debug("login failures not read: %s", exc)
        return False
    for key, limit in zip(keys, _limits(), strict=False):
        raw = found.get(key)
        if raw is not None and raw.isdigit() and int(raw) >= limit:
            return True
    return False


def note_failure(request: HttpRequest, username: str) -> None:
    window = int(get_config()["LOGIN_WINDOW"])
    client = get_client()
    for key in failure_keys(request, username):
        try:
            if client.incr(key, 1) is None:
                client.add(key, b"1", expire=window)
        except (MemcacheError, OSError) as exc:
            logger.debug("login failure not counted: %s", exc)


class ThrottledLoginView(LoginView):
    """Django's LoginView, refusing tries past the limit before any password is hashed."""

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        username = request.POST.get("username", "")
        if isinstance(username, str) and is_throttled(request, username):
            wait = int(get_config()["LOGIN_WINDOW"])
            message = f"Too many failed logins. Try again in {wait // 60} minutes."
            note_refusal(request, "login_failures", message, wait, status=429)
            form = self.get_form()
            form.errors.clear()
            response = self.render_to_response(
                self.get_context_data(form=form, throttled=message), status=429
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: object) -> HttpResponse:
        username = self.request.POST.get("username", "")
        if isinstance(username, str) and username:
            note_failure(self.request, username)
        return super().form_invalid(form)

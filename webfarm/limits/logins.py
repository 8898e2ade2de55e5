"""Login tries: after a few wrong passwords, a pause, farm-wide.

Every wrong password costs the farm a password hash (PBKDF2, a fifth of a
second of a core) and gives a guesser one more try. A username or an address
that tried LOGIN_FAILURES times within LOGIN_WINDOW seconds without getting
in is refused at once until the window lapses, before any password is
hashed. The counts live in memcached (`login-fail:user:<hash>`,
`login-fail:addr:<hash>`, for LOGIN_WINDOW seconds): someone who can write
there can refuse a user's logins for a window at a time, as with any slot,
never let a guesser through. memcached unreachable: logins go on unthrottled.

A try is counted before its password is hashed (`reserve`): an atomic
increment says whether it is within the limit, so forty guesses sent at
once, to one node or to many, get no more hashes than forty sent one by
one. A try that gets in gives its count back. Every place a password is
checked counts under the same name: the authentication backend (so every
login form, the admin's too: `webfarm.limits.backends`) and the old-password
field of a password change (`webfarm.limits.passwords`).

A username is counted as the login form will authenticate it: the form's own
username field cleans it (Django's strips it and folds it to NFKC, so a
fullwidth or mathematical `dave` is `dave`), then case is folded too, since the
database's collation may ignore case where Python would not.
"""

import logging
import unicodedata
from dataclasses import dataclass, field
from typing import Any

from django.contrib.auth.forms import AuthenticationForm
from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse
from pymemcache.exceptions import MemcacheError

from webfarm.core.client import get_client
from webfarm.core.http import client_address
from webfarm.core.refusals import note_refusal
from webfarm.limits.conf import get_config
from webfarm.limits.windows import count, digest

logger = logging.getLogger(__name__)

# Where a refused try leaves its message on the request, for the page to show.
REFUSAL_ATTRIBUTE = "webfarm_login_refusal"


def counted_name(cleaned: str) -> str:
    """The name a login's failures count under, from the form field's
    cleaned username: every spelling that may authenticate as one user
    (case, compatibility forms) is one name."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", cleaned.strip()).casefold())


def failure_keys(request: HttpRequest | None, username: str) -> list[str]:
    """The keys counting this username's and this address's tries."""
    keys = [f"login-fail:user:{digest(counted_name(username))}"]
    address = client_address(request) if request is not None else ""
    if address:
        keys.append(f"login-fail:addr:{digest(address)}")
    return keys


@dataclass
class Refusal:
    """A try past the limit: what the page says, and for how long."""

    message: str
    wait: int


@dataclass
class Try:
    """A try counted before its password is hashed; `succeeded()` gives the
    count back."""

    keys: list[str] = field(default_factory=list)

    def succeeded(self) -> None:
        client = get_client()
        for key in self.keys:
            try:
                client.decr(key, 1)
            except (MemcacheError, OSError) as exc:  # a count a window long, at worst
                logger.debug("try not given back under %s: %s", key, exc)


def reserve(request: HttpRequest | None, username: str) -> Try | Refusal:
    """Count one try of `username` (and of the request's address) before its
    password is checked: a Refusal where either count is past its limit."""
    config = get_config()
    keys = failure_keys(request, username)
    window = int(config["LOGIN_WINDOW"])
    limits = [int(config["LOGIN_FAILURES"]), int(config["LOGIN_FAILURES_PER_ADDRESS"])]
    counts = count(keys, window)
    # Only the counts this try raised are given back.
    tried = Try([key for key, counted in zip(keys, counts, strict=True) if counted])
    if all(counted <= limit for counted, limit in zip(counts, limits, strict=False)):
        return tried
    tried.succeeded()  # a refused try costs nothing, so it counts as none
    message = f"Too many failed logins. Try again in {max(1, window // 60)} minutes."
    if request is not None:
        note_refusal(request, "login_failures", message, window, status=429)
        setattr(request, REFUSAL_ATTRIBUTE, Refusal(message, window))
    return Refusal(message, window)


def refusal_of(request: HttpRequest | None) -> Refusal | None:
    """The refusal a try of this request met, if any."""
    found = getattr(request, REFUSAL_ATTRIBUTE, None)
    return found if isinstance(found, Refusal) else None


def answered(request: HttpRequest, response: HttpResponse) -> HttpResponse:
    """A page's answer to `request`: 429 with Retry-After where one of its
    tries was refused (reserve)."""
    refusal = refusal_of(request)
    if refusal is not None:
        response.status_code = 429
        response["Retry-After"] = str(refusal.wait)
    return response


class ThrottledAuthenticationForm(AuthenticationForm):
    """Django's login form, saying so when the backend refused a try past the
    limit (where it would say "wrong password")."""

    @property
    def throttled(self) -> str:
        """The refusal's message, for the page ("" for a try not refused)."""
        refusal = refusal_of(self.request)
        return refusal.message if refusal is not None else ""

    def get_invalid_login_error(self) -> ValidationError:
        refusal = refusal_of(self.request)
        if refusal is not None:
            return ValidationError(refusal.message, code="throttled")
        return super().get_invalid_login_error()


class ThrottledLoginView(LoginView):
    """Django's LoginView, answering 429 with Retry-After for a try the
    backend refused (it counts and refuses: webfarm.limits.backends)."""

    authentication_form = ThrottledAuthenticationForm

    def form_invalid(self, form: Any) -> HttpResponse:
        return answered(self.request, super().form_invalid(form))

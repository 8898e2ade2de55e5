"""Login tries: after a few wrong passwords, a pause, farm-wide.

Every wrong password costs the farm a password hash (PBKDF2, a fifth of a
second of a core) and gives a guesser one more try. A username or an address
that failed LOGIN_FAILURES times within LOGIN_WINDOW seconds is refused at
once (429, with Retry-After) until the window lapses, before any password is
hashed. The counts live in memcached (`login-fail:user:<hash>`,
`login-fail:addr:<hash>`, for LOGIN_WINDOW seconds): someone who can write
there can refuse a user's logins for a window at a time, as with any slot,
never let a guesser through. memcached unreachable: logins go on unthrottled.

A username is counted as the login form will authenticate it: the form's own
username field cleans it (Django's strips it and folds it to NFKC, so a
fullwidth or mathematical `dave` is `dave`), then case is folded too, since the
database's collation may ignore case where Python would not.
"""

import unicodedata

from django.contrib.auth.views import LoginView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse

from webfarm.core.http import client_address
from webfarm.core.refusals import note_refusal
from webfarm.limits.conf import get_config
from webfarm.limits.windows import count, digest, reached


def counted_name(cleaned: str) -> str:
    """The name a login's failures count under, from the form field's
    cleaned username: every spelling that may authenticate as one user
    (case, compatibility forms) is one name."""
    return unicodedata.normalize("NFKC", unicodedata.normalize("NFKC", cleaned.strip()).casefold())


def failure_keys(request: HttpRequest, username: str) -> list[str]:
    """The keys counting this username's and this address's failures."""
    keys = [f"login-fail:user:{digest(counted_name(username))}"]
    address = client_address(request)
    if address:
        keys.append(f"login-fail:addr:{digest(address)}")
    return keys


def is_throttled(request: HttpRequest, username: str) -> bool:
    config = get_config()
    keys = failure_keys(request, username)
    return reached(keys, [config["LOGIN_FAILURES"], config["LOGIN_FAILURES_PER_ADDRESS"]][: len(keys)])


def note_failure(request: HttpRequest, username: str) -> None:
    count(failure_keys(request, username), int(get_config()["LOGIN_WINDOW"]))


class ThrottledLoginView(LoginView):
    """Django's LoginView, refusing tries past the limit before any password is hashed."""

    def post(self, request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        username = self._cleaned_username()
        if username and is_throttled(request, username):
            wait = int(get_config()["LOGIN_WINDOW"])
            message = f"Too many failed logins. Try again in {wait // 60} minutes."
            note_refusal(request, "login_failures", message, wait, status=429)
            # Unbound: a bound form validates itself when the page reads its
            # errors, and validating a login form authenticates (a hash).
            form = self.get_form_class()(request, initial={"username": username})
            response = self.render_to_response(
                self.get_context_data(form=form, throttled=message), status=429
            )
            response["Retry-After"] = str(wait)
            return response
        return super().post(request, *args, **kwargs)

    def form_invalid(self, form: object) -> HttpResponse:
        username = self._cleaned_username()
        if username:
            note_failure(self.request, username)
        return super().form_invalid(form)

    def _cleaned_username(self) -> str:
        """The posted username as the form's own field cleans it before
        authenticating (no validators run: nothing is refused here)."""
        raw = self.request.POST.get("username", "")
        if not isinstance(raw, str):
            return ""
        field = self.get_form_class()(self.request).fields["username"]
        try:
            cleaned = field.to_python(raw)
        except ValidationError:  # a project's own field may refuse here: counted as typed
            cleaned = raw
        return cleaned if isinstance(cleaned, str) else ""

"""The login throttle inside the authentication backend:

    AUTHENTICATION_BACKENDS = ["webfarm.limits.backends.ThrottledUserBackend"]

Django's `authenticate()` asks the backends, so a try counted here is
counted whichever form asked: the site's login page, the admin's, or a third
party's. The try is counted before the password is hashed and given back if
it gets in (webfarm.limits.logins.reserve); one past the limit stops
`authenticate()` (PermissionDenied) and leaves its refusal on the request for
the page. `ThrottledUserBackend` is the cached backend
(webfarm.core.users.CachedUserBackend) with the throttle; a project's own
password backend gets it from `LoginThrottleMixin`.
"""

from typing import Any

from django.contrib.auth import get_user_model
from django.contrib.auth.base_user import AbstractBaseUser
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest

from webfarm.core.users import CachedUserBackend
from webfarm.limits.logins import Refusal, reserve


class LoginThrottleMixin:
    """Counts each password try before the backend below it hashes it."""

    def authenticate(
        self,
        request: HttpRequest | None,
        username: str | None = None,
        password: str | None = None,
        **kwargs: Any,
    ) -> AbstractBaseUser | None:
        authenticate = super().authenticate  # type: ignore[misc]
        name = username if username is not None else kwargs.get(get_user_model().USERNAME_FIELD)
        if not isinstance(name, str) or password is None:
            untried: AbstractBaseUser | None = authenticate(
                request, username=username, password=password, **kwargs
            )
            return untried
        tried = reserve(request, name)
        if isinstance(tried, Refusal):
            raise PermissionDenied(tried.message)
        user: AbstractBaseUser | None = authenticate(request, username=username, password=password, **kwargs)
        if user is not None:
            tried.succeeded()
        return user


# The stubs type ModelBackend.authenticate with mypy's settings' user model; a project's may be any.
class ThrottledUserBackend(LoginThrottleMixin, CachedUserBackend):  # type: ignore[misc]
    """Users cached in memcached; password tries counted farm-wide."""

"""Password changes count their old-password checks as login tries.

A password change checks the old password with a hash, as a login does: with
a stolen session, a guesser could try passwords there without the login's
limit. The old password is counted under the user's name, with the login's
tries, before it is hashed (webfarm.limits.logins.reserve); past the limit
the form refuses it unhashed and the page answers 429. Both the site's form
(`ThrottledPasswordChangeView`) and the admin's (`throttle_admin`, which the
app applies to Django's default admin site at start) count.
"""

from types import MethodType
from typing import Any

from django.contrib.admin import AdminSite
from django.contrib.admin.forms import AdminAuthenticationForm
from django.contrib.auth.decorators import login_not_required
from django.contrib.auth.forms import PasswordChangeForm
from django.contrib.auth.views import PasswordChangeView
from django.core.exceptions import ValidationError
from django.http import HttpRequest, HttpResponse, HttpResponseBase
from django.urls import reverse
from django.utils.functional import LazyObject, empty

from webfarm.limits.logins import Refusal, ThrottledAuthenticationForm, answered, reserve


class ThrottledPasswordChangeForm(PasswordChangeForm):
    """Django's password change form, its old password counted as a login try."""

    def __init__(self, user: Any, *args: Any, request: HttpRequest | None = None, **kwargs: Any) -> None:
        super().__init__(user, *args, **kwargs)
        self.request = request

    def clean_old_password(self) -> str:
        old_password = self.cleaned_data["old_password"]
        tried = reserve(self.request, self.user.get_username())
        if isinstance(tried, Refusal):  # left on the request for the page too
            raise ValidationError(tried.message, code="throttled")
        if not self.user.check_password(old_password):
            raise ValidationError(self.error_messages["password_incorrect"], code="password_incorrect")
        tried.succeeded()
        return str(old_password)


class ThrottledAdminPasswordChangeForm(ThrottledPasswordChangeForm):
    required_css_class = "required"


class ThrottledAdminAuthenticationForm(AdminAuthenticationForm, ThrottledAuthenticationForm):
    """The admin's login form, saying a refused try is one."""


class ThrottledPasswordChangeView(PasswordChangeView):
    """Django's PasswordChangeView with the counted form; 429 past the limit."""

    form_class = ThrottledPasswordChangeForm

    def get_form_kwargs(self) -> dict[str, Any]:
        return {**super().get_form_kwargs(), "request": self.request}

    def form_invalid(self, form: Any) -> HttpResponse:
        return answered(self.request, super().form_invalid(form))


def _admin_password_change(
    site: AdminSite, request: HttpRequest, extra_context: Any = None
) -> HttpResponseBase:
    """AdminSite.password_change, with the counted form."""
    defaults: dict[str, Any] = {
        "form_class": ThrottledAdminPasswordChangeForm,
        "success_url": reverse("admin:password_change_done", current_app=site.name),
        "extra_context": {**site.each_context(request), **(extra_context or {})},
    }
    if site.password_change_template is not None:
        defaults["template_name"] = site.password_change_template
    request.current_app = site.name
    return ThrottledPasswordChangeView.as_view(**defaults)(request)


@login_not_required
def _admin_login(site: AdminSite, request: HttpRequest, extra_context: Any = None) -> HttpResponse:
    """AdminSite.login, answering 429 for a try the backend refused."""
    return answered(request, AdminSite.login(site, request, extra_context))


def throttle_admin(site: AdminSite) -> None:
    """The admin site's login page and password change counted as the site's
    are, where the project has not given the site views or forms of its own."""
    if isinstance(site, LazyObject):  # django.contrib.admin.site
        if site._wrapped is empty:
            site._setup()
        site = site._wrapped
    if site.login_form is None:
        site.login_form = ThrottledAdminAuthenticationForm
    if "login" not in vars(site) and type(site).login is AdminSite.login:
        site.login = MethodType(_admin_login, site)  # type: ignore[method-assign]
    if "password_change" not in vars(site) and type(site).password_change is AdminSite.password_change:
        site.password_change = MethodType(_admin_password_change, site)  # type: ignore[method-assign]

from collections.abc import Callable
from functools import wraps

from django.contrib.auth.views import redirect_to_login
from django.core.exceptions import PermissionDenied
from django.http import HttpRequest, HttpResponse
from django.urls import reverse


def staff_required(view: Callable[..., HttpResponse]) -> Callable[..., HttpResponse]:
    """Anonymous: to the admin's login. Logged in without staff: 403, rather
    than the admin's habit of showing its login form again."""

    @wraps(view)
    def wrapped(request: HttpRequest, *args: object, **kwargs: object) -> HttpResponse:
        user = request.user
        if not user.is_authenticated:
            return redirect_to_login(request.get_full_path(), reverse("admin:login"))
        if not (user.is_active and user.is_staff):
            raise PermissionDenied("The farm dashboard is for staff.")
        return view(request, *args, **kwargs)

    return wrapped

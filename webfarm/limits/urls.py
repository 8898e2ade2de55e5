"""Django's account URLs, with every password form counted:

    path("accounts/", include("webfarm.limits.urls")),

the login page (a few wrong passwords, then a pause), the password change
(its old password counted with the logins) and the password reset (a few
e-mails an hour), and the rest of django.contrib.auth.urls as they are.
"""

from django.contrib.auth import urls as auth_urls
from django.urls import URLPattern, path

from webfarm.limits.logins import ThrottledLoginView
from webfarm.limits.passwords import ThrottledPasswordChangeView
from webfarm.limits.resets import ThrottledPasswordResetView

counted: list[URLPattern] = [
    path("login/", ThrottledLoginView.as_view(), name="login"),
    path("password_change/", ThrottledPasswordChangeView.as_view(), name="password_change"),
    path("password_reset/", ThrottledPasswordResetView.as_view(), name="password_reset"),
]
names = {pattern.name for pattern in counted}
urlpatterns = [
    *counted,
    *(p for p in auth_urls.urlpatterns if getattr(p, "name", None) not in names),
]

"""Which requests are polls: reads that pages repeat every second or two.

The request log counts them instead of logging each one, and the dashboard's
newest activity leaves them out: a person looking for what happened would see
nothing else. Failed polls (400 and up) are neither: they are logged and shown.

Which views are polled, their apps say (webfarm.core.http.polled); where they are
mounted, the project's URLconf does. So this module knows no app's URLs: it
asks the URLconf which view a path reaches, and static files are polls too.
"""

from functools import lru_cache

from django.conf import settings
from django.core.signals import setting_changed
from django.dispatch import receiver
from django.urls import Resolver404, resolve

# No polled URL is longer (a job id and a token are 22 characters each): a
# longer path is not a poll, and is never cached.
MAX_POLL_PATH = 200


def is_poll(method: str | None, path: str | None) -> bool:
    if method not in ("GET", "HEAD") or not isinstance(path, str) or len(path) > MAX_POLL_PATH:
        return False
    return path.startswith(settings.STATIC_URL) or _reaches_polled_view(path)


# Paths repeat (a bar polls its own several hundred times); the cache is
# bounded in entries, and its keys in length (MAX_POLL_PATH).
@lru_cache(maxsize=4096)
def _reaches_polled_view(path: str) -> bool:
    try:
        match = resolve(path)
    except (Resolver404, ValueError):
        return False
    return getattr(match.func, "polled", False) is True


@receiver(setting_changed)
def _urls_changed(*, setting: str, **kwargs: object) -> None:
    if setting == "ROOT_URLCONF":
        _reaches_polled_view.cache_clear()


def area(path: str) -> str:
    """The counter label of a polled path: its first segment ("progress", "polls", ...)."""
    return path.split("/", 2)[1] or "root"

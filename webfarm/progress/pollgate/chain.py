"""The project's middleware around a poll view, less what a poll does not need."""

import logging
from collections.abc import Callable, Iterable

from django.conf import settings
from django.http import HttpRequest, HttpResponse
from django.utils.module_loading import import_string

logger = logging.getLogger(__name__)

Handler = Callable[[HttpRequest], HttpResponse]

# Refuses (DISALLOWED_USER_AGENTS) or redirects (PREPEND_WWW) requests before any view.
COMMON = "django.middleware.common.CommonMiddleware"

# Other projects' middleware that does nothing for a poll (a GET of JSON, no
# form, no static file, no message shown, the URL already matched), so the
# gate leaves it out. CommonMiddleware is run after all where its settings
# make it refuse or redirect requests (DISALLOWED_USER_AGENTS, PREPEND_WWW).
# A middleware of ours says so itself: a class attribute `poll_skippable =
# True` (webfarm.djangotasks.owners.TaskOwnerMiddleware: no task is started).
SKIPPED_FOR_POLLS = frozenset(
    {
        COMMON,
        "django.middleware.csrf.CsrfViewMiddleware",
        "django.contrib.messages.middleware.MessageMiddleware",
        "whitenoise.middleware.WhiteNoiseMiddleware",
    }
)
# What Django's handler calls besides the chain itself; the gate does not.
UNRUN_HOOKS = ("process_view", "process_exception", "process_template_response")


def poll_skippable(factory: object) -> bool:
    """Whether a middleware says it does nothing for a poll (`poll_skippable`)."""
    return getattr(factory, "poll_skippable", False) is True


def poll_chain(middleware: Iterable[str]) -> Handler | None:
    """The project's middleware around the poll view, less SKIPPED_FOR_POLLS;
    None if some middleware cannot run this way (then Django answers all)."""
    skipped = set(SKIPPED_FOR_POLLS)
    if settings.DISALLOWED_USER_AGENTS or settings.PREPEND_WWW:
        skipped.discard(COMMON)
    handler: Handler = _call_view
    for path in reversed(list(middleware)):
        if path in skipped:
            continue
        factory = import_string(path)
        if poll_skippable(factory):
            continue
        if not getattr(factory, "sync_capable", True):
            logger.warning("poll gate off: %s cannot run synchronously; Django answers every poll", path)
            return None
        instance = factory(handler)
        hooks = [h for h in UNRUN_HOOKS if hasattr(instance, h)]
        if hooks:
            logger.warning(
                "poll gate off: %s has %s, which the gate does not run; Django answers every poll",
                path,
                ", ".join(hooks),
            )
            return None
        handler = instance
    return handler


def checked_host(request: HttpRequest) -> None:
    """DisallowedHost for a Host not in ALLOWED_HOSTS, as Django's
    CommonMiddleware raises it (Django then answers 400)."""
    request.get_host()


def _call_view(request: HttpRequest) -> HttpResponse:
    match = request.resolver_match
    assert match is not None  # the gate resolved the path before it called the chain
    response: HttpResponse = match.func(request, **match.kwargs)
    return response

"""Who a task is enqueued for. Django's Tasks API has no user: a task
enqueued while a request is served belongs to its signed-in user (the
middleware), or to whom `owned_by()` names; any other is started by no one,
and only staff see it.
"""

from collections.abc import Callable, Iterator
from contextlib import contextmanager
from contextvars import ContextVar
from typing import TYPE_CHECKING

from django.http import HttpRequest, HttpResponse

if TYPE_CHECKING:  # not at import: `webfarm.djangotasks` is imported before the apps are ready
    from django.contrib.auth.models import AbstractBaseUser

# A callable, not the user: the request's user is read (a session lookup)
# only when a task is enqueued, not on every request.
_owner: ContextVar["Callable[[], AbstractBaseUser | None] | None"] = ContextVar(
    "webfarm_djangotasks_owner", default=None
)


@contextmanager
def owned_by(user: "AbstractBaseUser | None") -> Iterator[None]:
    """Tasks enqueued in the block belong to `user` (None: to no one)."""
    token = _owner.set(lambda: user)
    try:
        yield
    finally:
        _owner.reset(token)


def current_owner() -> "AbstractBaseUser | None":
    find = _owner.get()
    user = find() if find is not None else None
    return user if user is not None and user.is_authenticated else None


class TaskOwnerMiddleware:
    """Tasks a view enqueues belong to the request's signed-in user. After
    Django's AuthenticationMiddleware."""

    # A poll enqueues no task: the poll gate leaves this out of its answer.
    poll_skippable = True

    def __init__(self, get_response: Callable[[HttpRequest], HttpResponse]) -> None:
        self.get_response = get_response

    def __call__(self, request: HttpRequest) -> HttpResponse:
        token = _owner.set(lambda: getattr(request, "user", None))
        try:
            return self.get_response(request)
        finally:
            _owner.reset(token)

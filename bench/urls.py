import secrets

from django.http import HttpRequest, HttpResponse, JsonResponse
from django.urls import path
from django.views.decorators.http import require_POST

from demofarm.polls import services
from demofarm.polls.snapshot import poll_info_from_database
from demofarm.urls import urlpatterns as project_urls
from webfarm.core.client import get_client


def bare(request: HttpRequest) -> HttpResponse:
    """The least a Django view that reads memcached can do: one get, no auth."""
    return HttpResponse(get_client().get("bench:bare") or b"", content_type="application/json")


@require_POST
def vote_straight_to_database(request: HttpRequest, poll_id: int) -> HttpResponse:
    """The polls benchmark's baseline: the same vote from a new anonymous voter,
    checked the same way, written to the database as it is cast (the
    product's own path for when memcached is away)."""
    poll = poll_info_from_database(poll_id)
    ballot = services.Ballot(
        poll=poll,
        choice_id=int(request.POST["choice"]),
        voter=f"a:{secrets.token_urlsafe(16)}",
        user_id=None,
        address=request.META.get("REMOTE_ADDR"),
    )
    services.write_direct(services.new_vote(ballot))
    return JsonResponse({"accepted": True, "via": "direct"})


urlpatterns = [
    path("bench/bare/", bare),
    path("bench/polls/<int:poll_id>/vote/", vote_straight_to_database),
    *project_urls,
]

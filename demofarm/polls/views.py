import secrets

from django.http import Http404, HttpRequest, HttpResponse, HttpResponseRedirect, JsonResponse
from django.shortcuts import render
from django.urls import reverse
from django.views.decorators.http import require_POST, require_safe

from demofarm.polls import selectors, services
from webfarm.core.http import client_address, json_error, json_polled, polled, wants_json
from webfarm.limits.decorators import limit_concurrency

VOTER_COOKIE = "poll_voter"
VOTER_SALT = "polls.voter"
VOTER_MAX_AGE = 365 * 24 * 3600
# The polls this browser voted in (signed): a second vote is refused at once,
# without memcached, however long ago the first was.
VOTED_COOKIE = "poll_voted"
VOTED_SALT = "polls.voted"
VOTED_KEEP = 100


@require_safe
def poll_list(request: HttpRequest) -> HttpResponse:
    return render(request, "polls/list.html", {"polls": selectors.recent_polls()})


@require_safe
def poll_detail(request: HttpRequest, poll_id: int) -> HttpResponse:
    poll = selectors.poll_or_none(poll_id)
    if poll is None:
        raise Http404("No such poll.")
    return render(request, "polls/detail.html", {"poll": poll, "results": selectors.results(poll)})


@polled
@require_safe
def results_json(request: HttpRequest, poll_id: int) -> HttpResponse:
    poll = selectors.poll_or_none(poll_id)
    if poll is None:
        return json_error(404, "No such poll.")
    return json_polled(request, selectors.results(poll))


@require_POST
# memcached away: votes go to the database (services.cast), so the limit lets them through.
@limit_concurrency(
    "votes", total="VOTES", message="Too many votes at once right now; try again in a moment.", fail_open=True
)
def vote(request: HttpRequest, poll_id: int) -> HttpResponse:
    # What this process read of the poll last: the vote's own checks read it again.
    poll = selectors.poll_for_vote(poll_id)
    if poll is None:
        return json_error(404, "No such poll.")
    try:
        choice_id = int(request.POST.get("choice", ""))
    except ValueError:
        return _refused(request, poll_id, 400, "Pick one of the choices.")
    voted = _voted_in(request)
    if poll_id in voted:
        return _refused(request, poll_id, 409, services.ALREADY_VOTED)
    voter, new_cookie = _voter(request)
    ballot = services.Ballot(
        poll=poll,
        choice_id=choice_id,
        voter=voter,
        user_id=request.user.pk if request.user.is_authenticated else None,
        address=client_address(request),
    )
    try:
        via = services.cast(ballot)
    except services.VoteRefused as refusal:
        response = _refused(request, poll_id, refusal.status, refusal.message)
        if refusal.status == 409:
            _remember_vote(response, voted, poll_id)
    else:
        if wants_json(request):
            response = JsonResponse({"accepted": True, "via": via})
        else:
            response = HttpResponseRedirect(reverse("polls:detail", args=[poll_id]) + "?voted=1")
        _remember_vote(response, voted, poll_id)
    if new_cookie:
        response.set_signed_cookie(
            VOTER_COOKIE, new_cookie, salt=VOTER_SALT, max_age=VOTER_MAX_AGE, httponly=True, samesite="Lax"
        )
    return response


def _voted_in(request: HttpRequest) -> list[int]:
    raw = request.get_signed_cookie(VOTED_COOKIE, default="", salt=VOTED_SALT, max_age=VOTER_MAX_AGE)
    return [int(part) for part in raw.split(".") if part.isdigit()]


def _remember_vote(response: HttpResponse, voted: list[int], poll_id: int) -> None:
    kept = [*[p for p in voted if p != poll_id][-(VOTED_KEEP - 1) :], poll_id]
    response.set_signed_cookie(
        VOTED_COOKIE,
        ".".join(map(str, kept)),
        salt=VOTED_SALT,
        max_age=VOTER_MAX_AGE,
        httponly=True,
        samesite="Lax",
    )


def _voter(request: HttpRequest) -> tuple[str, str | None]:
    """Who is voting: the user, or the anonymous id in a signed cookie (a new
    one when there is none or it was tampered with)."""
    if request.user.is_authenticated:
        return f"u:{request.user.pk}", None
    known = request.get_signed_cookie(VOTER_COOKIE, default=None, salt=VOTER_SALT, max_age=VOTER_MAX_AGE)
    if known:
        return f"a:{known}", None
    fresh = secrets.token_urlsafe(16)
    return f"a:{fresh}", fresh


def _refused(request: HttpRequest, poll_id: int, status: int, message: str) -> HttpResponse:
    if wants_json(request):
        return json_error(status, message)
    poll = selectors.poll_or_none(poll_id)
    context = {"poll": poll, "results": selectors.results(poll), "error": message}
    return render(request, "polls/detail.html", context, status=status)

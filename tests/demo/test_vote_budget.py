"""A vote's round-trip budget, measured on the wire as the library's are
(tests/unit/test_budgets.py): a change that adds a round trip to a vote fails here."""

import pytest
from django.test import Client

from tests.harness.roundtrips import counting, runs, steady
from webfarm.core import revocations

pytestmark = pytest.mark.django_db

JSON = {"HTTP_ACCEPT": "application/json"}


@pytest.fixture(autouse=True)
def counted(settings, monkeypatch):
    monkeypatch.setattr(revocations, "REFRESH", 3600.0)  # once a second, not per request
    with counting(settings):
        yield


@pytest.fixture
def poll():
    from demofarm.polls.models import Poll
    from demofarm.polls.services import flush_all

    poll = Poll.objects.create(question="Tabs or spaces?")
    for position, text in enumerate(["Tabs", "Spaces"]):
        poll.choices.create(text=text, position=position)
    flush_all()  # the running totals, as the flusher keeps them
    return poll


def test_a_vote_is_at_most_three_round_trips_and_no_query(poll, settings):
    settings.POLLS = {**settings.POLLS, "ANONYMOUS_PER_ADDRESS": 1000}
    choice = poll.choices.first().id
    csrf = {"HTTP_X_CSRFTOKEN": "c" * 32}

    def vote():
        # A new anonymous voter each time, as in a spike.
        client = Client()
        client.cookies["csrftoken"] = "c" * 32
        return client.post(f"/polls/{poll.id}/vote/", {"choice": choice}, **JSON, **csrf)

    vote(), vote()  # warm: connections made, counters registered
    cost = steady(vote)
    trips = " | ".join(map(runs, cost.trips))
    print(f"\nbudget|a vote (new anonymous voter)|{cost.round_trips}|{cost.commands}|{cost.queries}|{trips}")
    assert cost.result.status_code == 200 and cost.result.json() == {"accepted": True, "via": "queue"}
    assert cost.round_trips <= 3 and cost.queries == 0

"""`manage.py seed_demo`: what a newcomer finds after `make run`."""

import pytest
from django.contrib.auth import get_user_model
from django.core.management import call_command

from demofarm.polls.models import Poll
from demofarm.reports.models import Order

pytestmark = pytest.mark.django_db


def test_seeding_makes_the_accounts_a_poll_and_the_shop_data_once(monkeypatch):
    monkeypatch.setenv("DEMO_ORDERS", "200")
    call_command("seed_demo", verbosity=0)
    call_command("seed_demo", verbosity=0)  # again: nothing twice
    assert sorted(get_user_model().objects.values_list("username", flat=True)) == ["admin", "alice", "bob"]
    poll = Poll.objects.get()
    assert poll.is_open and [c.text for c in poll.choices.all()] == [
        "Sales by region",
        "Top customers",
        "Product return rates",
    ]
    assert Order.objects.count() == 200

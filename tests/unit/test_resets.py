"""Password resets (webfarm.limits.resets): a few an hour per e-mail address
and per client, then 429 without a word sent; a refusal tells nobody whether
the address has an account."""

import pytest
from django.contrib.auth import get_user_model
from django.core import mail
from django.test import Client

pytestmark = pytest.mark.django_db


@pytest.fixture
def limits(settings):
    settings.LIMITS = {**settings.LIMITS, "RESETS_PER_EMAIL": 2, "RESETS_PER_ADDRESS": 4}
    get_user_model().objects.create_user("dora", email="dora@example.com", password="x" * 20)


def _reset(email: str, address: str = "10.3.3.3"):
    return Client().post("/accounts/password_reset/", {"email": email}, REMOTE_ADDR=address)


def test_resets_past_the_limit_for_an_address_are_refused_and_send_nothing(limits):
    assert [_reset("dora@example.com").status_code for _ in range(2)] == [302, 302]
    assert len(mail.outbox) == 2
    refused = _reset("DORA@example.com", address="10.4.4.4")  # another spelling, another client
    assert refused.status_code == 429 and int(refused["Retry-After"]) == 3600
    assert "Too many password resets" in refused.content.decode()
    assert len(mail.outbox) == 2


def test_an_address_without_an_account_is_counted_and_refused_alike(limits):
    answers = [_reset("nobody@example.com").status_code for _ in range(3)]
    assert answers == [302, 302, 429] and not mail.outbox


def test_one_client_asking_for_many_addresses_is_refused(limits):
    answers = [_reset(f"user{n}@example.com", address="10.5.5.5").status_code for n in range(5)]
    assert answers == [302] * 4 + [429]
    assert _reset("dora@example.com", address="10.6.6.6").status_code == 302

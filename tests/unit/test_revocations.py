"""Revocations (webfarm.core.revocations): a copy in memcached made before a change
the database knows of is refused, in every process, within REFRESH seconds."""

import time

import pytest

from webfarm.core import revocations
from webfarm.core.models import Revocation

pytestmark = pytest.mark.django_db


def test_a_revocation_written_by_another_process_is_read_within_refresh(monkeypatch):
    monkeypatch.setattr(revocations, "REFRESH", 0.2)
    made = time.time()
    assert not revocations.superseded("user:1.abc", made)
    # Another process revokes it: a row, no note in this process's memory.
    Revocation.objects.create(key="user:1.abc", at=time.time(), until=time.time() + 60)
    deadline = time.monotonic() + 2
    while not revocations.superseded("user:1.abc", made):
        assert time.monotonic() < deadline, "the revocation was never read"
        time.sleep(0.05)
    assert not revocations.superseded("user:2.abc", made)
    # A copy made well after the revocation is believed again.
    assert not revocations.superseded("user:1.abc", time.time() + revocations.CLOCK_SLACK + 1)


def test_a_row_committed_after_a_newer_one_is_still_read(monkeypatch):
    monkeypatch.setattr(revocations, "REFRESH", 0)
    later = Revocation.objects.create(key="b", at=time.time(), until=time.time() + 60)
    assert revocations.superseded("b", time.time())
    # An id handed out before `later`'s, committed after the process read `later`.
    Revocation.objects.create(id=later.id - 1, key="a", at=time.time(), until=time.time() + 60)
    assert revocations.superseded("a", time.time())


def test_lapsed_revocations_are_deleted_and_forgotten(monkeypatch):
    monkeypatch.setattr(revocations, "REFRESH", 0)
    Revocation.objects.create(key="old", at=time.time() - 100, until=time.time() - 1)
    assert not revocations.superseded("old", time.time() - 200)
    revocations.revoke("new", lasts=60)
    assert list(Revocation.objects.values_list("key", flat=True)) == ["new"]


def test_the_database_away_keeps_the_known_revocations(monkeypatch):
    from django.db import DatabaseError

    revocations.revoke("k", lasts=60)
    monkeypatch.setattr(revocations, "REFRESH", 0)

    def fails(self) -> None:
        raise DatabaseError("gone")

    monkeypatch.setattr(revocations._Known, "refresh", fails)
    assert revocations.superseded("k", time.time() - 1)

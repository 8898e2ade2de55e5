"""What a farm keeps is bounded: ended jobs and expired sessions go."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from webfarm.core.tasks import clear_expired_sessions
from webfarm.progress import services
from webfarm.progress.api import PartSpec
from webfarm.progress.models import Job, JobPart
from webfarm.progress.retention import purge_ended_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def test_ended_jobs_older_than_keep_days_go_with_their_parts(alice, settings):
    old, recent, running = (
        services.create_job(owner=alice, kind="count", title=t, params={}, parts=[PartSpec()] * 2)
        for t in "ORR"
    )
    for job in (old, recent):
        services.cancel_job(job=job)
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    Job.objects.filter(pk=running.pk).update(created_at=timezone.now() - timedelta(days=90))
    assert purge_ended_jobs() == 1
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, running.pk}
    assert not JobPart.objects.filter(job_id=old.pk).exists()
    settings.PROGRESS = {**settings.PROGRESS, "KEEP_DAYS": 0}
    Job.objects.filter(pk=recent.pk).update(finished_at=timezone.now() - timedelta(days=400))
    assert purge_ended_jobs() == 0


def test_expired_sessions_go():
    Session.objects.create(session_key="e" * 32, session_data="", expire_date=timezone.now() - timedelta(1))
    Session.objects.create(session_key="f" * 32, session_data="", expire_date=timezone.now() + timedelta(1))
    clear_expired_sessions()
    assert list(Session.objects.values_list("session_key", flat=True)) == ["f" * 32]

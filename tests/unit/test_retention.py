"""What a farm keeps is bounded: ended jobs, uploads and expired sessions go."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.contrib.sessions.models import Session
from django.utils import timezone

from demofarm.imports.models import Upload
from demofarm.imports.services import purge_uploads
from demofarm.reports.models import ResultFile
from webfarm.core.tasks import clear_expired_sessions
from webfarm.progress import services
from webfarm.progress.models import Job
from webfarm.progress.retention import purge_ended_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def test_ended_jobs_older_than_keep_days_go_with_their_files(alice, settings):
    old, recent, running = (services.create_job(owner=alice, kind="demo", title=t, params={}) for t in "ORR")
    for job in (old, recent):
        services.cancel_job(job=job)
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    Job.objects.filter(pk=running.pk).update(created_at=timezone.now() - timedelta(days=90))
    ResultFile.objects.create(job=old, name="old.csv", content_type="text/csv", size=0)
    assert purge_ended_jobs() == 1
    assert set(Job.objects.values_list("pk", flat=True)) == {recent.pk, running.pk}
    assert not ResultFile.objects.exists()
    settings.PROGRESS = {**settings.PROGRESS, "KEEP_DAYS": 0}
    Job.objects.filter(pk=recent.pk).update(finished_at=timezone.now() - timedelta(days=400))
    assert purge_ended_jobs() == 0


def test_old_uploads_and_expired_sessions_go(alice):
    kept = Upload.objects.create(owner=alice, name="new.csv", data=b"x", size=1)
    old = Upload.objects.create(owner=alice, name="old.csv", data=b"x", size=1)
    Upload.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    assert purge_uploads() >= 1
    assert list(Upload.objects.values_list("pk", flat=True)) == [kept.pk]
    Session.objects.create(session_key="e" * 32, session_data="", expire_date=timezone.now() - timedelta(1))
    Session.objects.create(session_key="f" * 32, session_data="", expire_date=timezone.now() + timedelta(1))
    clear_expired_sessions()
    assert list(Session.objects.values_list("session_key", flat=True)) == ["f" * 32]

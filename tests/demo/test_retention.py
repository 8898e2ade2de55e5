"""What the demo keeps is bounded: old uploads go, and a job's result files with it."""

from datetime import timedelta

import pytest
from django.contrib.auth import get_user_model
from django.utils import timezone

from demofarm.imports.models import Upload
from demofarm.imports.services import purge_uploads
from demofarm.reports.models import ResultFile
from webfarm.progress import services
from webfarm.progress.models import Job
from webfarm.progress.retention import purge_ended_jobs

pytestmark = pytest.mark.django_db


@pytest.fixture
def alice():
    return get_user_model().objects.create_user("alice", password="x")


def test_a_purged_job_s_result_files_go_with_it(alice):
    old = services.create_job(owner=alice, kind="top-customers", title="Old", params={})
    services.cancel_job(job=old)
    Job.objects.filter(pk=old.pk).update(finished_at=timezone.now() - timedelta(days=31))
    ResultFile.objects.create(job=old, name="old.csv", content_type="text/csv", size=0)
    assert purge_ended_jobs() == 1
    assert not ResultFile.objects.exists()


def test_old_uploads_go(alice):
    kept = Upload.objects.create(owner=alice, name="new.csv", data=b"x", size=1)
    old = Upload.objects.create(owner=alice, name="old.csv", data=b"x", size=1)
    Upload.objects.filter(pk=old.pk).update(created_at=timezone.now() - timedelta(days=31))
    assert purge_uploads() >= 1
    assert list(Upload.objects.values_list("pk", flat=True)) == [kept.pk]

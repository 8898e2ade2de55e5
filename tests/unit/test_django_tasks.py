"""Django's Tasks API, in process: what enqueue records and whom it belongs
to, what get_result and cancel answer, and what the backend refuses. Running
tasks on a worker: tests/farm/test_django_tasks.py."""

from datetime import UTC, datetime

import pytest
from django.contrib.auth import get_user_model
from django.core import checks
from django.http import HttpResponse
from django.template import Context, Template
from django.test import Client, RequestFactory

from tests.harness import django_tasks as tasks
from webfarm.djangotasks.compat import InvalidTask, TaskResultDoesNotExist, task_backends, task_finished
from webfarm.djangotasks.owners import TaskOwnerMiddleware, owned_by
from webfarm.progress.api import Job
from webfarm.progress.launching.admission import StartRefused
from webfarm.progress.records import JobRecord
from webfarm.progress.reporter import ProgressReporter

pytestmark = pytest.mark.django_db


@pytest.fixture
def staff():
    return get_user_model().objects.create_user("staff", password="x", is_staff=True)


def test_enqueue_records_a_queued_job_for_its_owner(alice):
    with owned_by(alice):
        result = tasks.count_to.enqueue(5, label="pears")
    job = Job.objects.get(pk=result.id)
    assert (job.owner, job.kind, job.state) == (alice, "task.default.default", "queued")
    assert job.params == {
        "task": "tests.harness.django_tasks.count_to",
        "args": [5],
        "kwargs": {"label": "pears"},
    }
    assert str(result.status) == "READY" and result.args == [5] and result.kwargs == {"label": "pears"}
    again = task_backends["default"].get_result(result.id)
    assert again.id == result.id and str(again.status) == "READY" and again.task is tasks.count_to
    assert again.progress["state"] == "queued" and again.metadata == {}
    assert tasks.count_to.get_result(result.id).id == result.id


def test_a_view_enqueues_for_its_signed_in_user(alice):
    request = RequestFactory().post("/")
    request.user = alice
    made = []
    TaskOwnerMiddleware(lambda request: made.append(tasks.divide.enqueue(1, 2)) or HttpResponse())(request)
    assert Job.objects.get(pk=made[0].id).owner == alice


def test_a_task_enqueued_by_no_one_is_shown_to_staff_alone(alice, staff):
    result = tasks.divide.enqueue(4, 2)
    job = Job.objects.get(pk=result.id)
    assert job.owner is None
    as_alice, as_staff = Client(), Client()
    as_alice.force_login(alice)
    as_staff.force_login(staff)
    assert as_alice.get(f"/progress/{job.id}/").status_code == 404
    assert as_staff.get(f"/progress/{job.id}/").json()["state"] == "queued"
    assert Client().get(f"/progress/{job.id}/{job.read_token}/").json()["job"] == job.id


def test_cancelling_a_queued_task_fails_it_as_cancelled(alice):
    with owned_by(alice):
        result = tasks.wait_until_cancelled.enqueue()
    finished = []

    def heard(sender, task_result, **kwargs):
        finished.append(task_result)

    task_finished.connect(heard)
    try:
        cancelled = task_backends["default"].cancel(result.id)
        task_backends["default"].cancel(result.id)  # ended already: no second signal
    finally:
        task_finished.disconnect(heard)
    assert str(cancelled.status) == "FAILED"
    # It never started, and still finished, as Django's signals say of such a task.
    ((heard_result),) = finished
    assert heard_result.id == result.id and str(heard_result.status) == "FAILED"
    assert [e.exception_class_path for e in heard_result.errors] == [
        "webfarm.progress.exceptions.JobCancelled"
    ]
    assert heard_result.worker_ids == [] and heard_result.attempts == 0 and heard_result.started_at is None
    assert [e.exception_class_path for e in cancelled.errors] == ["webfarm.progress.exceptions.JobCancelled"]
    assert cancelled.errors[0].exception_class.__name__ == "JobCancelled"
    with pytest.raises(ValueError, match="failed"):
        _ = cancelled.return_value


@pytest.mark.parametrize("result_id", ["nope", "", "A" * 22, "../../etc", 42])
def test_an_unknown_result_does_not_exist(result_id):
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(result_id)


def test_a_job_that_is_not_a_task_is_no_result(alice):
    job = Job.objects.create(owner=alice, kind="demo", title="Not a task")
    with pytest.raises(TaskResultDoesNotExist):
        task_backends["default"].get_result(job.id)


def test_what_the_backend_cannot_do_is_refused_when_the_task_is_made(settings):
    backend = task_backends["default"]
    assert backend.supports_get_result and backend.supports_async_task
    with pytest.raises(InvalidTask, match="priority"):
        tasks.divide.using(priority=5)
    with pytest.raises(InvalidTask, match="run_after"):
        tasks.divide.using(run_after=datetime(2030, 1, 1, tzinfo=UTC))
    with pytest.raises(InvalidTask, match="not valid"):
        tasks.divide.using(queue_name="elsewhere")


def test_a_queue_name_must_name_a_job_kind(settings):
    settings.TASKS = {
        "default": {"BACKEND": "webfarm.djangotasks.backend.CeleryBackend", "QUEUES": ["default", "a b"]}
    }
    with pytest.raises(InvalidTask, match="queue name"):
        tasks.divide.using(queue_name="a b")
    problems = list(task_backends["default"].check())
    assert [p.id for p in problems] == ["webfarm_djangotasks.E002"]
    # Django's own check of TASKS runs it, with "django_tasks" in no
    # INSTALLED_APPS on Django 5.2 either (webfarm.djangotasks loads its checks).
    assert "webfarm_djangotasks.E002" in [m.id for m in checks.run_checks(databases=[])]


@pytest.mark.parametrize(
    ("metadata", "why"),
    [
        ({"n": {1, 2}}, "must be JSON"),
        ({"big": "x" * 5000}, "more than 4096"),
        ({"nan": float("nan")}, "JSON"),
    ],
)
def test_metadata_that_is_not_small_json_is_refused_when_saved(metadata, why):
    reporter = ProgressReporter(JobRecord(job="A" * 22, owner=1, kind="demo"))
    reporter.metadata.update(metadata)
    with pytest.raises(ValueError, match=why):
        reporter.save_metadata()
    assert reporter.record.metadata == {}


def test_the_bar_takes_a_task_result_as_it_takes_a_job(alice):
    with owned_by(alice):
        result = tasks.count_to.enqueue(3)
    job = Job.objects.get(pk=result.id)
    html = Template("{% load webfarm_progress %}{% progress_bar result %}").render(
        Context({"result": result})
    )
    assert f'data-progress-url="/progress/{job.id}/{job.read_token}/"' in html
    assert f'action="/progress/{job.id}/cancel/"' in html


def test_tasks_queue_in_bursts_unless_limits_are_set(alice, settings):
    with owned_by(alice):
        burst = [tasks.divide.enqueue(1, n) for n in range(1, 13)]
    assert len({result.id for result in burst}) == 12  # the jobs' 4-at-once limits are not a task's
    settings.TASKS = {
        "default": {
            "BACKEND": "webfarm.djangotasks.backend.CeleryBackend",
            "OPTIONS": {"LIMITS": {"PER_USER": 2, "PER_KIND": 50}},
        }
    }
    with owned_by(alice):
        tasks.divide.enqueue(1, 1)
        tasks.divide.enqueue(1, 2)
        with pytest.raises(StartRefused, match="You already have 2 tasks queued or running"):
            tasks.divide.enqueue(1, 3)


def test_a_task_s_page_and_result_are_its_owner_s_and_staff_s(alice, staff):
    with owned_by(alice):
        result = tasks.divide.enqueue(6, 3)
    as_alice, as_staff, as_bob = Client(), Client(), Client()
    as_alice.force_login(alice)
    as_staff.force_login(staff)
    as_bob.force_login(get_user_model().objects.create_user("bob-tasks"))
    page = as_alice.get(f"/tasks/{result.id}/")
    assert page.status_code == 200 and b"Divide" in page.content and b"job-progress" in page.content
    body = as_alice.get(f"/tasks/{result.id}/result/").json()
    assert body["status"] == "READY" and body["task"] == "tests.harness.django_tasks.divide"
    assert body["attempts"] == 0 and body["return_value"] is None and body["errors"] == []
    assert as_staff.get(f"/tasks/{result.id}/result/").status_code == 200
    for url in (f"/tasks/{result.id}/", f"/tasks/{result.id}/result/"):
        assert as_bob.get(url).status_code == 404  # not bob's: as if there were none
        assert Client().get(url).status_code == 302  # to the login page
        assert as_alice.post(url).status_code in (403, 405)  # read only


@pytest.mark.parametrize("result_id", ["nope", "A" * 22, "..%2F..%2Fetc", "%00", "x" * 500])
def test_a_task_page_for_no_task_is_a_404(alice, result_id):
    client = Client()
    client.force_login(alice)
    assert client.get(f"/tasks/{result_id}/").status_code == 404
    assert client.get(f"/tasks/{result_id}/result/").status_code == 404
    job = Job.objects.create(owner=alice, kind="demo", title="Not a task")
    assert client.get(f"/tasks/{job.id}/result/").status_code == 404

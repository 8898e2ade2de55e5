"""The library's periodic work as beat entries (webfarm.core.beat), on the
project's Celery app without a line of the project's."""

import os
import subprocess
import sys
from importlib import import_module
from pathlib import Path

from celery import Celery, current_app
from celery import beat as celery_beat
from celery.signals import beat_init
from django.conf import settings

from webfarm.core import beat

ROOT = Path(__file__).resolve().parents[2]
EVERY_APP = ["webfarm.core", "webfarm.queues", "webfarm.progress", "webfarm.activity", "webfarm.stats"]


def test_each_entry_names_a_task_its_app_defines():
    entries = beat.schedule([*EVERY_APP, "django.contrib.admin"], mirrors=True)
    for app in EVERY_APP:
        import_module(f"{app}.tasks")
    assert {entry["task"] for entry in entries.values()} <= set(current_app.tasks)
    assert len(entries) == 7


def test_only_the_apps_a_site_installed_and_its_intervals():
    entries = beat.schedule(["webfarm.core", "webfarm.progress.apps.ProgressConfig"], reap_every=2.0)
    assert sorted(entries) == ["clear-expired-sessions", "purge-ended-jobs", "reap-lost-jobs"]
    assert entries["reap-lost-jobs"] == {
        "task": beat.REAPER,
        "schedule": 2.0,
        "options": {"expires": 4.0},  # no pile of stale sends while no worker is up
    }
    # Mirrors are repaired only where the queues app is.
    assert "repair-queue-mirrors" not in beat.schedule(["webfarm.progress"], mirrors=True)


def test_a_starting_beat_gets_the_installed_apps_entries_under_the_site_s_own(tmp_path):
    app = Celery("site", set_as_current=False)
    faster = {"task": beat.REAPER, "schedule": 1.0}
    app.conf.beat_schedule = {"reap-lost-jobs": faster, "site-chore": {"task": "site.chore", "schedule": 9.0}}
    service = celery_beat.Service(app=app, schedule_filename=str(tmp_path / "schedule"))
    beat_init.send(sender=service)  # as `celery beat` sends it, once its scheduler is made
    scheduled = service.scheduler.schedule
    assert scheduled["reap-lost-jobs"].schedule.run_every.total_seconds() == 1.0  # the site's
    assert scheduled["site-chore"].task == "site.chore"
    assert {"purge-ended-jobs", "clear-expired-sessions", "harvest-counters"} <= set(scheduled)
    service.scheduler.close()


def test_a_project_that_schedules_nothing_gets_the_reaper_on_its_beat(tmp_path):
    # The test project sets no CELERY_BEAT_SCHEDULE; its Celery app is made before Django starts.
    code = (
        "import sys\nfrom celery import Celery, beat\nfrom celery.signals import beat_init\n"
        "app = Celery('project')\n"
        "app.config_from_object('django.conf:settings', namespace='CELERY')\n"
        "import django; django.setup()\n"
        "service = beat.Service(app=app, schedule_filename=sys.argv[1])\n"
        "beat_init.send(sender=service)\n"
        "print(sorted(e.task for e in service.scheduler.schedule.values()))"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "tests.project.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code, str(tmp_path / "schedule")],
        cwd=ROOT,
        env=env,
        capture_output=True,
        text=True,
        check=True,
    )
    assert beat.REAPER in out.stdout and "webfarm.stats.harvest_counters" in out.stdout


def test_the_site_sends_every_beat_task_to_its_housekeeping_queue():
    # Settings are read once, at start: a process of its own, as a worker or beat starts.
    code = (
        "import django; django.setup()\n"
        "from django.conf import settings\nfrom demofarm.celery import app\n"
        "tasks = {entry['task'] for entry in settings.CELERY_BEAT_SCHEDULE.values()}\n"
        "print(sorted({app.amqp.router.route({}, task)['queue'].name for task in tasks}), len(tasks))\n"
        "print(app.amqp.router.route({}, 'webfarm.progress.run_job')['queue'].name)"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demofarm.settings", "HOUSEKEEPING_QUEUE": "chores"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    ).stdout.split("\n")
    assert out[0] == f"['chores'] {len(settings.CELERY_BEAT_SCHEDULE)}"
    assert out[1] == settings.CELERY_TASK_DEFAULT_QUEUE  # the reports stay where every worker serves
    assert "flush-votes" in settings.CELERY_BEAT_SCHEDULE


def test_starting_django_leaves_celery_s_current_app_to_the_project():
    """An app module that imports celery's current_app while Django loads the
    apps, before the project has made its Celery app (the demo makes it in its
    ready()), makes Celery's fallback app the default for every thread: a web
    server's request threads then sent tasks to an AMQP broker nobody runs,
    and no job started (webfarm.core.apps once did, for the beat schedule)."""
    code = (
        "import threading, django\ndjango.setup()\nfrom celery import current_app\n"
        "seen = []\nthread = threading.Thread(target=lambda: seen.append(current_app.main))\n"
        "thread.start(); thread.join(); print(seen[0])"
    )
    env = {**os.environ, "DJANGO_SETTINGS_MODULE": "demofarm.settings"}
    out = subprocess.run(
        [sys.executable, "-c", code], cwd=ROOT, env=env, capture_output=True, text=True, check=True
    )
    assert out.stdout.strip() == "demofarm"
